"""The project as a user installs it: the wheel holds every module and package of the checkout,
and its entry modules import and find their data outside the checkout."""

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile

from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_SHIPPED = {"tests"}  # the suite runs from the checkout.


def checkout_modules() -> set[str]:
  """The importable names of the checkout: root modules, and every package and subpackage."""
  names = {f[:-3] for f in os.listdir(ROOT) if f.endswith(".py")}
  for directory, folders, files in os.walk(ROOT):
    folders[:] = [f for f in folders if not f.startswith(".") and f not in NOT_SHIPPED]
    if directory != ROOT and "__init__.py" in files:
      names.add(os.path.relpath(directory, ROOT).replace(os.sep, "."))
  return names


def wheel_modules(wheel: str) -> set[str]:
  """The root modules and packages a wheel installs."""
  names = set()
  for path in zipfile.ZipFile(wheel).namelist():
    parts = path.split("/")
    if ".dist-info" in parts[0]:
      continue
    if len(parts) == 1 and path.endswith(".py"):
      names.add(path[:-3])
    elif parts[-1] == "__init__.py":
      names.add(".".join(parts[:-1]))
  return names


def pins(lines) -> dict[str, str]:
  """{package: version} of `name==version` requirement lines (comments and blanks skipped)."""
  result = {}
  for line in lines:
    line = line.split("#")[0].strip()
    if line:
      name, version = line.split("==")
      result[name.strip().lower().replace("_", "-")] = version.strip()
  return result


class PinsTest(absltest.TestCase):

  def test_pyproject_pins_what_requirements_txt_pins(self):
    # CI installs requirements.txt; `pip install -e ".[test]"` reads pyproject.toml.
    with open(os.path.join(ROOT, "requirements.txt")) as f:
      wanted = pins(f)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
      project = tomllib.load(f)["project"]
    declared = pins(project["dependencies"] + project["optional-dependencies"]["test"])
    self.assertEqual(declared, wanted)

  def test_the_accelerator_builds_are_ci_s_jax_with_a_backend(self):
    # A CUDA or TPU install must run the JAX the suite ran: only the backend plugin differs.
    with open(os.path.join(ROOT, "requirements.txt")) as f:
      jax_version = pins(f)["jax"]
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
      extras = tomllib.load(f)["project"]["optional-dependencies"]
    for backend in ("cuda12", "cuda13", "tpu"):
      with open(os.path.join(ROOT, f"requirements-{backend}.txt")) as f:
        lines = [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]
      self.assertEqual(lines, ["-r requirements.txt", f"jax[{backend}]=={jax_version}"])
      self.assertEqual(extras[backend], [f"jax[{backend}]=={jax_version}"])


class WheelTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.TemporaryDirectory()
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    source = os.path.join(cls.tmp.name, "source")
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".*", "__pycache__", "build", "*.egg-info", "runs", "docs", "notebooks", *NOT_SHIPPED))
    # The build backend installed beside the requirements (no build isolation: nothing is
    # downloaded).
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", cls.tmp.name, source], check=True,
                   cwd=cls.tmp.name, capture_output=True)
    (cls.wheel,) = [os.path.join(cls.tmp.name, f) for f in os.listdir(cls.tmp.name)
                    if f.endswith(".whl")]

  @classmethod
  def tearDownClass(cls):
    cls.tmp.cleanup()
    super().tearDownClass()

  def test_the_wheel_holds_every_module_of_the_checkout(self):
    self.assertEqual(wheel_modules(self.wheel), checkout_modules())

  def test_installed_outside_the_checkout_it_imports_and_finds_its_data(self):
    site = os.path.join(self.tmp.name, "site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
                    site, self.wheel], check=True, capture_output=True)
    code = ("import main, train, experiment, validation, input_pipeline\n"
            "from configs import hybrid4\n"
            "config = hybrid4.get_config()\n"
            "experiment.resolve(config)\n"
            "digits = input_pipeline.load('digits', image_size=64)\n"  # package data.
            "print(train.__file__, len(digits.x_train), config.parallelism)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = site
    result = subprocess.run([sys.executable, "-c", code], cwd=self.tmp.name, env=env,
                            capture_output=True, text=True, timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    path, examples, scheme = result.stdout.split()
    self.assertEqual(os.path.dirname(path), site)  # not the checkout's train.py.
    self.assertEqual((int(examples), scheme), (1437, "hybrid"))


if __name__ == "__main__":
  absltest.main()

"""The project as a user installs it: the wheel holds every module and package of the checkout,
and its entry modules import and find their data outside the checkout."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile

from absl.testing import absltest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from notebooks import runtime
from tests import testing

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


def as_tuples(found) -> set[tuple]:
  """(name, extras, version specifier, environment marker) of each Requirement."""
  return {(canonicalize_name(r.name), tuple(sorted(r.extras)), str(r.specifier),
           str(r.marker or "")) for r in found}


def requirements(lines) -> set[tuple]:
  """`as_tuples` of requirement strings (pyproject.toml's lists)."""
  return as_tuples(map(Requirement, lines))


def read_requirements(name: str) -> set[tuple]:
  """`as_tuples` of a requirements file's own lines, its `-r` includes skipped: read as the
  notebook and the accelerator report read it (notebooks/runtime.py)."""
  return as_tuples(runtime.read_requirements(os.path.join(ROOT, name), follow_includes=False))


def version_for(name: str, pins: set[tuple], python: str) -> str:
  """The one version `pins` give package `name` on Python `python` ("3.12")."""
  (spec,) = [spec for n, extras, spec, marker in pins if n == name and not extras and
             (not marker or Marker(marker).evaluate({"python_version": python}))]
  return spec.removeprefix("==")


def pyproject() -> dict:
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


class PinsTest(absltest.TestCase):

  def test_pyproject_pins_what_the_requirements_files_pin(self):
    # CI installs the requirements files; `pip install -e ".[test]"` reads pyproject.toml.
    project = pyproject()
    self.assertEqual(requirements(project["dependencies"]), read_requirements("requirements.txt"))
    self.assertEqual(requirements(project["optional-dependencies"]["test"]),
                     read_requirements("requirements-test.txt"))

  def test_each_python_gets_the_newest_jax_it_can_run(self):
    # JAX 0.11 and later need Python >= 3.12; jax, jaxlib and flax move together.
    pins = read_requirements("requirements.txt")
    for python, jax_version in (("3.11", "0.10.2"), ("3.12", "0.12.0.1"), ("3.13", "0.12.0.1")):
      self.assertEqual(version_for("jax", pins, python), jax_version)
      self.assertEqual(version_for("jaxlib", pins, python), jax_version)
    # ... and this environment holds the pins of its Python.
    python = ".".join(map(str, sys.version_info[:2]))
    for name in ("jax", "jaxlib", "flax"):
      self.assertEqual(importlib.metadata.version(name), version_for(name, pins, python))

  def test_libtpu_is_jax_tpu_s_own_pin_and_only_a_test_requirement(self):
    # The suite's TPU compile needs the libtpu that jax[tpu] asks for; a user who trains on a CPU
    # or GPU never downloads it.
    self.assertNotIn("libtpu", {name for name, *_ in read_requirements("requirements.txt")})
    python = ".".join(map(str, sys.version_info[:2]))
    wanted = version_for("libtpu", read_requirements("requirements-test.txt"), python)
    (jax_tpu,) = [Requirement(r) for r in importlib.metadata.requires("jax")
                  if r.startswith("libtpu") and 'extra == "tpu"' in r]
    self.assertIn(wanted, jax_tpu.specifier)

  def test_the_accelerator_builds_are_the_same_jax_with_a_backend(self):
    # A CUDA or TPU install runs the JAX the suite ran on its Python: only the backend differs.
    jax_pins = {(spec, marker) for name, _, spec, marker in read_requirements("requirements.txt")
                if name == "jax"}
    extras = pyproject()["optional-dependencies"]
    for backend in ("cuda12", "cuda13", "tpu"):
      expected = {("jax", (backend,), spec, marker) for spec, marker in jax_pins}
      self.assertEqual(read_requirements(f"requirements-{backend}.txt"), expected)
      with open(os.path.join(ROOT, f"requirements-{backend}.txt")) as f:
        self.assertIn("-r requirements.txt", [line.strip() for line in f])
      self.assertEqual(requirements(extras[backend]), expected)


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
    env = {**os.environ, "PYTHONPATH": testing.pythonpath_with(site)}  # the wheel's modules first.
    result = subprocess.run([sys.executable, "-c", code], cwd=self.tmp.name, env=env,
                            capture_output=True, text=True, timeout=300)
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    path, examples, scheme = result.stdout.split()
    self.assertEqual(os.path.dirname(path), site)  # not the checkout's train.py.
    self.assertEqual((int(examples), scheme), (1437, "hybrid"))


if __name__ == "__main__":
  absltest.main()

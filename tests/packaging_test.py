"""The project as a user installs it: the wheel holds every module and package of the checkout,
and its entry modules import and find their data outside the checkout."""

import importlib.metadata
import json
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


def python_environment(python: str) -> dict[str, str]:
  return {"python_version": python, "python_full_version": f"{python}.0"}


PYTHON = ".".join(map(str, sys.version_info[:2]))
# Each Python CI tests (3.11: JAX 0.10.2; 3.13: JAX 0.12) and the one between (the GPU machines').
PYTHONS = ("3.11", "3.12", "3.13")
# requirements-test.txt's pins that have no range in the test extra: each is the version its JAX
# asks for (libtpu: jax[tpu]'s pin; the CUDA 13 plugin and its compiler pieces: jax 0.12.0.1's).
COMPILE_ONLY = {"libtpu", "jax-cuda13-plugin", "nvidia-cuda-nvcc", "nvidia-nvvm"}


def installed(name: str) -> str | None:
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


# Whether this environment was built from the pins of its Python (CI's are; a user's may hold any
# version in the ranges): judged by JAX, which the markers pick per Python.
PINNED_JAX = version_for("jax", read_requirements("requirements.txt"), PYTHON)
BUILT_FROM_THE_PINS = installed("jax") == PINNED_JAX
NEEDS_THE_PINS = absltest.skipUnless(
    BUILT_FROM_THE_PINS, f"this environment's jax {installed('jax')} is not Python {PYTHON}'s "
    f"pin {PINNED_JAX}: not built from requirements.txt (its ranges are checked instead)")


class PinsTest(absltest.TestCase):

  def test_every_pin_lies_in_its_supported_range_on_every_python(self):
    # pyproject.toml declares the ranges once; the requirements files pin what CI tests in them.
    for extra, files in ((None, ("requirements.txt",)),
                         ("imagenet", ("requirements-imagenet.txt",)),
                         ("test", ("requirements-test.txt",))):
      for python in PYTHONS:
        ranges = {canonicalize_name(r.name): r.specifier for r in runtime.supported_ranges(
            ROOT, extra=extra, environment=python_environment(python))}
        pinned = {canonicalize_name(r.name): runtime.pinned_version(r)
                  for file in files
                  for r in runtime.pins(os.path.join(ROOT, file), follow_includes=False,
                                        environment=python_environment(python))}
        self.assertEqual(set(pinned) - COMPILE_ONLY, set(ranges), (extra, python))
        for name, specifier in ranges.items():
          self.assertTrue(specifier.contains(pinned[name]),
                          f"{name}=={pinned[name]} (Python {python}) outside {specifier}")

  def test_the_requirements_files_include_each_other_as_the_extras_do(self):
    def includes(name):
      with open(os.path.join(ROOT, name)) as f:
        return [line.split()[1] for line in f if line.startswith("-r ")]
    self.assertEqual(includes("requirements-imagenet.txt"), ["requirements.txt"])
    self.assertEqual(includes("requirements-test.txt"), ["requirements-imagenet.txt"])

  def test_the_quickstart_installs_no_tensorflow(self):
    names = {name for name, *_ in read_requirements("requirements.txt")}
    names |= {canonicalize_name(Requirement(r).name) for r in pyproject()["dependencies"]}
    for package in ("tensorflow-cpu", "tensorflow", "tensorflow-datasets", "grain",
                    "array-record", "simplejpeg"):
      self.assertNotIn(package, names)

  def test_each_python_gets_the_newest_jax_it_can_run(self):
    # JAX 0.11 and later need Python >= 3.12; jax, jaxlib and flax move together.
    pins = read_requirements("requirements.txt")
    for python, jax_version in (("3.11", "0.10.2"), ("3.12", "0.12.0.1"), ("3.13", "0.12.0.1")):
      self.assertEqual(version_for("jax", pins, python), jax_version)
      self.assertEqual(version_for("jaxlib", pins, python), jax_version)

  def test_this_environment_lies_in_the_supported_ranges(self):
    # Any supported environment: the suite runs where the project runs.
    for requirement in runtime.supported_ranges(ROOT):
      have = installed(requirement.name)
      self.assertIsNotNone(have, requirement.name)
      self.assertTrue(requirement.specifier.contains(have), f"{requirement.name} {have}")

  @NEEDS_THE_PINS
  def test_this_environment_holds_its_pythons_pins(self):
    # What CI installed is what the files pin (no dependency moved a pinned package).
    for requirement in runtime.pins(os.path.join(ROOT, "requirements-test.txt")):
      if not requirement.extras:
        self.assertEqual(installed(requirement.name), runtime.pinned_version(requirement),
                         requirement.name)

  @NEEDS_THE_PINS
  def test_libtpu_is_jax_tpu_s_own_pin_and_only_a_test_requirement(self):
    # The suite's TPU compile needs the libtpu that jax[tpu] asks for; a user who trains on a CPU
    # or GPU never downloads it.
    self.assertNotIn("libtpu", {name for name, *_ in read_requirements("requirements.txt")})
    wanted = version_for("libtpu", read_requirements("requirements-test.txt"), PYTHON)
    (jax_tpu,) = [Requirement(r) for r in importlib.metadata.requires("jax")
                  if r.startswith("libtpu") and 'extra == "tpu"' in r]
    self.assertIn(wanted, jax_tpu.specifier)

  def test_the_accelerator_builds_are_the_same_jax_with_a_backend(self):
    # A CUDA or TPU install runs the JAX the suite ran on its Python: only the backend differs.
    jax_pins = {(spec, marker) for name, _, spec, marker in read_requirements("requirements.txt")
                if name == "jax"}
    (jax_range,) = [r for r in pyproject()["dependencies"] if Requirement(r).name == "jax"]
    extras = pyproject()["optional-dependencies"]
    for backend in ("cuda12", "cuda13", "tpu"):
      expected = {("jax", (backend,), spec, marker) for spec, marker in jax_pins}
      self.assertEqual(read_requirements(f"requirements-{backend}.txt"), expected)
      with open(os.path.join(ROOT, f"requirements-{backend}.txt")) as f:
        self.assertIn("-r requirements.txt", [line.strip() for line in f])
      self.assertEqual(requirements(extras[backend]),
                       requirements([jax_range.replace("jax", f"jax[{backend}]", 1)]))


class ImagenetExtraTest(absltest.TestCase):
  """Without the imagenet extra, the paths that need it say so in one sentence."""

  def run_without(self, modules, code):
    tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          env=testing.environment_without(tmp, modules), text=True, timeout=300)

  def test_a_prepared_dataset_without_grain_names_the_extra(self):
    directory = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
    # A manifest as prepare.py writes it, over empty files: the check comes before any read.
    files = {"train": ["train-00000-of-00001.array_record"],
             "eval": ["eval-00000-of-00001.array_record"]}
    for names in files.values():
      open(os.path.join(directory, names[0]), "w").close()
    with open(os.path.join(directory, "prepared.json"), "w") as f:
      json.dump({"image_format": "jpeg", "quality": 90, "size": 32, "num_classes": 2,
                 "class_names": ["a", "b"], "source": "folder:x", "files": files,
                 "examples": {"train": 4, "eval": 2}, "skipped": {"train": 0, "eval": 0},
                 "mean": [0, 0, 0], "std": [1, 1, 1]}, f)
    result = self.run_without(
        ["grain", "array_record", "simplejpeg"],
        "from hybrid_parallel.errors import UserError\n"
        "import input_pipeline\n"
        "try:\n"
        f"  input_pipeline.load('prepared:{directory}', image_size=32)\n"
        "except UserError as e:\n"
        "  print(e)\n")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(result.stdout.strip(),
                     f"the prepared dataset {directory!r} needs grain, array-record and simplejpeg, not "
                     f"installed here: install the imagenet extra (pip install -r "
                     f"requirements-imagenet.txt, or pip install \".[imagenet]\").")

  def test_preparing_without_array_record_names_the_extra(self):
    result = self.run_without(
        ["array_record"],
        "from hybrid_parallel.errors import UserError\n"
        "from input_pipeline import prepare\n"
        "try:\n"
        "  prepare.prepare('folder:nowhere', 'out')\n"
        "except UserError as e:\n"
        "  print(e)\n")
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertEqual(result.stdout.strip(),
                     "python -m input_pipeline.prepare needs array-record, not installed here: "
                     "install the imagenet extra (pip install -r requirements-imagenet.txt, or "
                     "pip install \".[imagenet]\").")


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

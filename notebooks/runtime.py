"""What notebooks/colab.ipynb needs from the environment it finds: the machine's accelerator, the
packages the environment lacks or has outside the project's supported ranges, the JAX build for
the accelerator (kept where one is installed), whether the session must restart, and where the
chosen scheme trains.

The supported ranges are pyproject.toml's `[project] dependencies`, declared once; a package
missing or outside its range is installed at the version CI tests on this Python (its pin in
requirements.txt), and nothing else is touched. The ImageNet packages (TensorFlow, tfds, Grain:
requirements-imagenet.txt) are not the notebook's: it installs none of them.

It also reads the requirements files for the rest of the project (the accelerator report, the
packaging test): with `packaging`, the reader pip itself uses. Standard library and `packaging`
only (every Colab runtime has it, and so does an environment requirements.txt built, through its
packages' dependencies): it runs before anything is installed. The notebook imports it as
`notebooks.runtime` from the repository root, its working folder.
"""

import dataclasses
import importlib.metadata
import os
import sys
import tomllib
from collections.abc import Callable, Mapping

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hybrid_parallel import accelerators  # standard library only, as this module.

# --- The requirements files and the supported ranges ----------------------------------------


def read_requirements(path: str, *, follow_includes: bool = True) -> list[Requirement]:
  """The requirements of a requirements file, comments and blanks skipped; its `-r FILE` lines
  read in place when `follow_includes` (FILE relative to the including file), else skipped."""
  found = []
  with open(path) as f:
    for line in f:
      line = line.split("#", 1)[0].strip()
      if not line:
        continue
      if line.startswith("-r"):
        if follow_includes:
          included = os.path.join(os.path.dirname(path), line[2:].strip())
          found += read_requirements(included)
        continue
      found.append(Requirement(line))
  return found


def _holding(requirements, environment: Mapping[str, str] | None) -> list[Requirement]:
  """`requirements` whose markers hold in `environment` (a `packaging` marker environment;
  default: this interpreter's), each (name, extras) once, the last one read winning."""
  environment = {**default_environment(), **(environment or {})}
  chosen = {}
  for requirement in requirements:
    if requirement.marker is None or requirement.marker.evaluate(environment):
      chosen[(canonicalize_name(requirement.name), frozenset(requirement.extras))] = requirement
  return list(chosen.values())


def pins(path: str, *, environment: Mapping[str, str] | None = None,
         follow_includes: bool = True) -> list[Requirement]:
  """The requirements of `path` (its includes followed when `follow_includes`) whose markers hold
  in `environment`."""
  return _holding(read_requirements(path, follow_includes=follow_includes), environment)


def pinned_version(requirement: Requirement) -> str:
  """The version of an exact pin (`name==version`)."""
  (specifier,) = requirement.specifier
  if specifier.operator != "==":
    raise ValueError(f"{requirement} is not an exact pin (name==version).")
  return specifier.version


def pyproject(root: str) -> dict:
  """pyproject.toml's [project] table."""
  with open(os.path.join(root, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


def supported_ranges(root: str, *, extra: str | None = None,
                     environment: Mapping[str, str] | None = None) -> list[Requirement]:
  """The supported ranges the project declares (pyproject.toml's `dependencies`, or its optional
  `extra`) whose markers hold in `environment`."""
  project = pyproject(root)
  lines = project["optional-dependencies"][extra] if extra else project["dependencies"]
  return _holding(map(Requirement, lines), environment)


# --- The machine ----------------------------------------------------------------------------

# JAX's accelerator builds: the extra of `jax` that installs each, and the distribution whose
# presence says it is installed.
BUILD_DISTRIBUTIONS = {"cuda12": "jax-cuda12-plugin", "cuda13": "jax-cuda13-plugin",
                       "tpu": "libtpu"}
# JAX's installation guide: CUDA 13 needs an NVIDIA driver >= 580 on Linux, CUDA 12 one >= 525.
CUDA13_DRIVER = 580


def accelerator(*, root: str = "/") -> str:
  """"tpu", "gpu" or "cpu": the machine's accelerator, found as JAX finds one (a TPU chip on the
  PCI bus: Colab's v5e-1; an NVIDIA GPU's device files: its T4, L4, A100, H100), before JAX is
  imported."""
  if accelerators.google_tpu_chips(root=root):
    return "tpu"
  return "gpu" if accelerators.nvidia_gpu(root=root) else "cpu"


def installed_version(name: str) -> str | None:
  """The installed version of distribution `name`, or None."""
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def installed_requires(name: str) -> list[str]:
  """The requirement lines the installed distribution `name` declares."""
  try:
    return importlib.metadata.requires(name) or []
  except importlib.metadata.PackageNotFoundError:
    return []


def jax_build(runtime_accelerator: str, *, version: Callable[[str], str | None],
              driver: str | None) -> tuple[str | None, str]:
  """The JAX build the accelerator needs ("cuda12", "cuda13", "tpu"; None on a CPU), and why.

  On a GPU an installed CUDA plugin is kept (the one at jaxlib's version where both are); where
  none is, the driver picks: CUDA 13 from driver 580 on, CUDA 12 below it or where the driver's
  version cannot be read.
  """
  if runtime_accelerator == "tpu":
    return "tpu", "libtpu"
  if runtime_accelerator != "gpu":
    return None, "no accelerator"
  installed = [build for build in ("cuda13", "cuda12") if version(BUILD_DISTRIBUTIONS[build])]
  if installed:
    jaxlib = version("jaxlib")
    at_jaxlib = [b for b in installed if _same(version(BUILD_DISTRIBUTIONS[b]), jaxlib)]
    build = (at_jaxlib or installed)[0]
    return build, f"the installed {BUILD_DISTRIBUTIONS[build]} is kept"
  if driver is None:
    return "cuda12", "no CUDA plugin installed and no driver version found: CUDA 12"
  if int(driver.split(".")[0]) >= CUDA13_DRIVER:
    return "cuda13", f"no CUDA plugin installed; driver {driver} runs CUDA 13"
  return "cuda12", f"no CUDA plugin installed; driver {driver} runs CUDA 12, not 13 (needs 580)"


# --- The plan -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Install:
  """What bringing the environment into the supported ranges takes.

  Attributes:
    install: pip's arguments, one `name[extras]==version` each: the packages missing or outside
      their range, at this Python's pins; `jax[BUILD]` where JAX's accelerator build must come too.
    changes: for each package installed, `name: installed → version (why)`.
    kept: `name version` of each package already in its range.
    build: the accelerator's JAX build (`jax_build`), or None.
    build_note: why that build.
    names: every distribution the plan judged, kept or to install.
  """
  install: tuple[str, ...]
  changes: tuple[str, ...]
  kept: tuple[str, ...]
  build: str | None
  build_note: str
  names: tuple[str, ...]


def plan_install(root: str, runtime_accelerator: str, *,
                 version: Callable[[str], str | None] = installed_version,
                 requires: Callable[[str], list[str]] = installed_requires,
                 environment: Mapping[str, str] | None = None,
                 driver: str | None = None) -> Install:
  """What the environment needs, in the checkout at `root`, to run the project on
  `runtime_accelerator`: each package of the supported ranges (`supported_ranges`) that is missing
  or outside its range, at its pin for this Python (requirements.txt); and JAX's build for the
  accelerator (`jax_build`) where it is missing or at another version than the jaxlib that will
  run (a CUDA plugin), or outside what that jax asks for (libtpu).

  Args:
    version: a distribution's installed version, or None (the environment's, by default).
    requires: an installed distribution's requirement lines.
    environment: the marker environment (default: this interpreter's).
    driver: the NVIDIA driver's version (accelerators.nvidia_driver_version()), or None.
  """
  pinned = {canonicalize_name(r.name): pinned_version(r)
            for r in pins(os.path.join(root, "requirements.txt"), environment=environment)}
  install, changes, kept, names = {}, [], [], []
  for requirement in supported_ranges(root, environment=environment):
    name = canonicalize_name(requirement.name)
    names.append(name)
    have = version(name)
    if have is not None and requirement.specifier.contains(have, prereleases=True):
      kept.append(f"{name} {have}")
      continue
    why = "missing" if have is None else f"outside {requirement.specifier}"
    install[name] = f"{name}=={pinned[name]}"
    changes.append(f"{name}: {have or 'none'} → {pinned[name]} ({why})")

  build, build_note = jax_build(runtime_accelerator, version=version, driver=driver)
  if build:
    jax_version = pinned["jax"] if "jax" in install else version("jax")
    jaxlib_version = pinned["jaxlib"] if "jaxlib" in install else version("jaxlib")
    distribution = BUILD_DISTRIBUTIONS[build]
    names.append(distribution)
    have = version(distribution)
    if build == "tpu":  # libtpu: the version the installed jax asks for (its own metadata).
      met = have is not None and "jax" not in install and _extra_met(
          "jax", build, version=version, requires=requires)
    else:  # a CUDA plugin runs only beside the jaxlib of its own version.
      met = _same(have, jaxlib_version)
    if met:
      kept.append(f"{distribution} {have}")
    else:
      install["jax"] = f"jax[{build}]=={jax_version}"
      target = jaxlib_version if build != "tpu" else f"the one jax {jax_version} asks for"
      changes.append(f"{distribution}: {have or 'none'} → {target} (jax[{build}]: {build_note})")
  return Install(tuple(install.values()), tuple(changes), tuple(kept), build, build_note,
                 tuple(names))


def _same(a: str | None, b: str | None) -> bool:
  return a is not None and b is not None and not _differ(a, b)


def _extra_met(name: str, extra: str, *, version, requires) -> bool:
  """Whether every distribution the installed `name`'s `extra` asks for is installed at a version
  it allows (read from the installed distribution's own requirements)."""
  for line in requires(name):
    needed = Requirement(line)
    if needed.marker is None or not needed.marker.evaluate({"extra": extra}):
      continue
    have = version(needed.name)
    if have is None or not needed.specifier.contains(have, prereleases=True):
      return False
  return True


def describe(plan: Install, runtime_accelerator: str) -> str:
  """What the first cell says it found and would do, in three lines."""
  found = {"cpu": "No accelerator found: JAX runs on the CPU.",
           "gpu": f"NVIDIA GPU found: JAX's {plan.build} build, {plan.build_note}.",
           "tpu": f"TPU found: JAX's TPU build, {plan.build_note}."}[runtime_accelerator]
  return "\n".join([
      found,
      f"Kept (in the supported ranges, pyproject.toml): {', '.join(plan.kept) or 'nothing'}.",
      f"To install: {'; '.join(plan.changes)}." if plan.install else "Nothing to install."])


# The pins of each JAX build, for the sentence that says how to install what is missing.
REQUIREMENTS_FILES = {None: "requirements.txt", "cuda12": "requirements-cuda12.txt",
                      "cuda13": "requirements-cuda13.txt", "tpu": "requirements-tpu.txt"}


def missing_sentence(plan: Install, *, pip_failed: bool = False) -> str:
  """One sentence: what this environment lacks, and how to get it (INSTALL off, or pip failed:
  no package index reachable, most often)."""
  names = ", ".join(plan.install)
  file = REQUIREMENTS_FILES[plan.build]
  if pip_failed:
    return (f"pip could not install {names} (its message is above): install them where a "
            f"package index is reachable (pip install -r {file} gives the versions the tests "
            f"ran with), then run this cell again.")
  return (f"This environment lacks {names} (missing, or outside the versions the project runs "
          f"on: pyproject.toml): set INSTALL = True at the top of this cell, or pip install -r "
          f"{file}, then run this cell again.")


def restart_needed(names, *, modules: Mapping[str, object] = sys.modules,
                   version: Callable[[str], str | None] = installed_version,
                   top_levels: Mapping[str, list[str]] | None = None) -> str | None:
  """One sentence when this session runs a module of one of the distributions `names` at
  another version than the one now installed (imported before an install replaced it, or
  before an earlier run of this cell did): only a restart loads the installed one. None
  otherwise. A module is judged by its `__version__`.

  Args:
    top_levels: module → the distributions that provide it
      (importlib.metadata.packages_distributions(), by default).
  """
  if top_levels is None:
    top_levels = importlib.metadata.packages_distributions()
  wanted = {canonicalize_name(name) for name in names}
  stale = []
  for module_name, distributions in sorted(top_levels.items()):
    module = modules.get(module_name)
    loaded = getattr(module, "__version__", None)
    for name in distributions:
      installed = version(name)
      if (canonicalize_name(name) in wanted and isinstance(loaded, str) and installed and
          _differ(loaded, installed)):
        stale.append(f"{module_name} {loaded} (installed: {installed})")
        break
  if not stale:
    return None
  return (f"This session runs {', '.join(stale)}, imported before the project's versions were "
          f"installed: restart the session (Runtime → Restart session) and run this cell again.")


def _differ(a: str, b: str) -> bool:
  try:
    return Version(a) != Version(b)
  except InvalidVersion:
    return a != b


def colab_runtime(path: str, section: str) -> dict[str, str]:
  """The distributions (canonical name → version) of one of Colab's runtimes as
  notebooks/colab_runtimes.txt records them (its section [cpu], [gpu] or [tpu])."""
  versions, current = {}, None
  with open(path) as f:
    for line in f:
      line = line.split("#", 1)[0].strip()
      if line.startswith("["):
        current = line.strip("[]")
      elif line and current == section:
        requirement = Requirement(line)
        versions[canonicalize_name(requirement.name)] = pinned_version(requirement)
  if not versions:
    raise ValueError(f"{path} has no [{section}] section.")
  return versions


def pip_command(install) -> list[str]:
  """pip installing `install` into this kernel's Python."""
  return [sys.executable, "-m", "pip", "install", "--quiet", *install]


# --- Where the chosen scheme trains -----------------------------------------------------------

# The runtime's devices the default run needs: below this the 1-device scheme trains.
DEFAULT_MULTI_DEVICE_CONFIG, DEFAULT_SINGLE_DEVICE_CONFIG = "hybrid4", "single"
# NVIDIA GPUs run bfloat16 matmuls from compute capability 8.0 (Ampere) on; a T4 (7.5, Colab's
# free GPU) emulates them, slower than float32.
BFLOAT16_COMPUTE_CAPABILITY = 8.0


@dataclasses.dataclass(frozen=True)
class Run:
  """The config the notebook trains, its changes, and where it runs."""
  config: str
  narrow: bool  # the config's model replaced by its `_tiny` variant.
  overrides: dict  # config fields set after that.
  platform: str  # where the mesh runs: the runtime's accelerator, or "cpu".
  note: str  # one line saying where and why.


def choose_run(config: str | None, *, platform: str, device_count: int,
               mesh_devices: dict[str, int], compute_capability: str | None = None) -> Run:
  """Where `config` (None: the default for this runtime) trains.

  The default is `hybrid4` where the runtime has 4 or more devices (a TPU v5e-8 on Kaggle, a CPU
  runtime's simulated devices) and the 1×1 `single` where it has fewer (Colab's one-chip TPU
  v5e-1, a 1-GPU runtime). On an accelerator the network trains at the papers' 224², in bfloat16
  where the chip has bfloat16 units (TPUs; NVIDIA GPUs of compute capability 8.0 and later) and
  float32 elsewhere (a T4); a mesh larger than the accelerator runs on simulated CPU devices,
  narrowed to the `_tiny` network so that a few hundred steps take a minute.

  Args:
    config: a file of configs/ by name, or None.
    platform: jax.default_backend().
    device_count: jax.device_count().
    mesh_devices: each config's mesh size (data × model), by name.
    compute_capability: a GPU's (jax.devices()[0].compute_capability, "7.5"); None elsewhere.
  """
  if config is None:
    config = (DEFAULT_MULTI_DEVICE_CONFIG if platform == "cpu" or device_count >= 4
              else DEFAULT_SINGLE_DEVICE_CONFIG)
  needed = mesh_devices[config]
  if platform != "cpu" and needed <= device_count:
    no_bfloat16 = (platform == "gpu" and compute_capability is not None and
                   float(compute_capability) < BFLOAT16_COMPUTE_CAPABILITY)
    dtype = "float32" if no_bfloat16 else "bfloat16"
    why = (f" (compute capability {compute_capability} has no bfloat16 units)"
           if no_bfloat16 else "")
    return Run(config, False, {"dtype": dtype, "image_size": 224}, platform,
               f"{config}: {needed} of this runtime's {device_count} {platform} device(s), "
               f"224² inputs, {dtype}{why}.")
  where = ("this runtime has no accelerator" if platform == "cpu" else
           f"this runtime has {device_count} {platform} device(s)")
  # The narrow network at the test suite's recipe (tests/train_test.py: batch 64, rate 0.1,
  # dropout 0.25; the notebook decays the rate after 60% of its steps).
  return Run(config, True, {"global_batch_size": 64, "base_learning_rate": 0.1, "image_size": 64,
                            "dropout_rate": 0.25},
             "cpu",
             f"{config} needs {needed} devices and {where}: it runs on {needed} simulated CPU "
             f"devices, with the narrow _tiny network at 64².")

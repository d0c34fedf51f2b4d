"""What notebooks/colab.ipynb needs from the runtime it finds: the runtime's accelerator, the
project's pins for it (requirements.txt on a CPU runtime, -cuda12.txt on a GPU runtime, -tpu.txt on
a TPU runtime), which of them the runtime already meets by version and which to install, whether
the session must restart, and where the chosen scheme trains.

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
from collections.abc import Callable, Mapping

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hybrid_parallel import accelerators  # standard library only, as this module.

# --- The requirements files -----------------------------------------------------------------


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


def pins(path: str, *, environment: Mapping[str, str] | None = None) -> list[Requirement]:
  """The requirements of `path` (includes followed) whose markers hold in `environment` (a
  `packaging` marker environment; default: this interpreter's), each named once."""
  environment = {**default_environment(), **(environment or {})}
  chosen = {}
  for requirement in read_requirements(path):
    if requirement.marker is None or requirement.marker.evaluate(environment):
      chosen[(canonicalize_name(requirement.name), frozenset(requirement.extras))] = requirement
  return list(chosen.values())


def pinned_version(requirement: Requirement) -> str:
  """The version of an exact pin (`name==version`)."""
  (specifier,) = requirement.specifier
  if specifier.operator != "==":
    raise ValueError(f"{requirement} is not an exact pin (name==version).")
  return specifier.version


# --- The runtime ----------------------------------------------------------------------------

# Which requirements file brings a runtime of each accelerator to the project's pins: the same JAX
# and packages, with JAX's build for the accelerator (Colab's GPUs run CUDA 12: its GPU runtime
# ships jax-cuda12-plugin).
REQUIREMENTS_FILES = {"cpu": "requirements.txt", "gpu": "requirements-cuda12.txt",
                      "tpu": "requirements-tpu.txt"}

# A pin whose module another distribution of the runtime already provides: Colab's CPU and GPU
# runtimes ship `tensorflow` (its full build), and `tensorflow-cpu` installed beside it would write
# a second distribution over the same files; the pin's version is installed as that distribution
# instead, which pip replaces in place.
PROVIDED_BY = {"tensorflow-cpu": "tensorflow"}

def accelerator(probes=accelerators) -> str:
  """"tpu", "gpu" or "cpu": the runtime's accelerator, found as JAX finds one (a Google TPU chip on
  the PCI bus: Colab's v5e-1; an NVIDIA GPU's device files: its T4, L4, A100, H100), before JAX is
  imported."""
  if probes.google_tpu_chips():
    return "tpu"
  return "gpu" if probes.nvidia_gpu() else "cpu"


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


@dataclasses.dataclass(frozen=True)
class Install:
  """What bringing the runtime to the pins takes.

  Attributes:
    requirements_file: the file of pins for the runtime's accelerator.
    install: pip's arguments, one `name[extras]==version` each, for the pins the runtime does not
      meet.
    changes: for each of them, `name: installed → pinned` (installed "none" when absent).
    met: the pins the runtime already meets, by name.
  """
  requirements_file: str
  install: tuple[str, ...]
  changes: tuple[str, ...]
  met: tuple[str, ...]

  @property
  def names(self) -> tuple[str, ...]:
    """Every pinned distribution, met or to install."""
    return self.met + tuple(canonicalize_name(Requirement(r).name) for r in self.install)


def plan_install(root: str, runtime_accelerator: str, *,
                 version: Callable[[str], str | None] = installed_version,
                 requires: Callable[[str], list[str]] = installed_requires,
                 environment: Mapping[str, str] | None = None) -> Install:
  """The pins for `runtime_accelerator` (REQUIREMENTS_FILES, in the checkout at `root`) that the
  runtime does not meet, judged by version: a pin is met when its distribution is installed at
  the pinned version and, for a pin with extras (`jax[cuda12]`), when every distribution that
  extra asks for (the installed distribution's own metadata says which) is installed at a version
  it allows.

  Args:
    version: a distribution's installed version, or None (the runtime's, by default).
    requires: an installed distribution's requirement lines.
    environment: the marker environment (default: this interpreter's).
  """
  file = REQUIREMENTS_FILES[runtime_accelerator]
  install, changes, met = [], [], []
  for requirement in pins(os.path.join(root, file), environment=environment):
    name = canonicalize_name(requirement.name)
    wanted = pinned_version(requirement)
    provider = PROVIDED_BY.get(name)
    if provider and version(name) is None and version(provider) is not None:
      name = provider
    have = version(name)
    extras_met = all(_extra_met(requirement, extra, version=version, requires=requires)
                     for extra in requirement.extras)
    if have is not None and Version(have) == Version(wanted) and extras_met:
      met.append(name)
      continue
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    install.append(f"{name}{extras}=={wanted}")
    changes.append(f"{name}{extras}: {have or 'none'} → {wanted}")
  return Install(file, tuple(install), tuple(changes), tuple(met))


def _extra_met(requirement: Requirement, extra: str, *, version, requires) -> bool:
  """Whether every distribution `requirement`'s `extra` asks for is installed at a version it
  allows (read from the installed distribution's own requirements)."""
  for line in requires(requirement.name):
    needed = Requirement(line)
    if needed.marker is None or not needed.marker.evaluate({"extra": extra}):
      continue
    have = version(needed.name)
    if have is None or not needed.specifier.contains(have, prereleases=True):
      return False
  return True


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


def colab_runtime(path: str, runtime_accelerator: str) -> dict[str, str]:
  """The distributions (canonical name → version) of one of Colab's runtimes as
  notebooks/colab_runtimes.txt records them (its section [cpu], [gpu] or [tpu])."""
  versions, section = {}, None
  with open(path) as f:
    for line in f:
      line = line.split("#", 1)[0].strip()
      if line.startswith("["):
        section = line.strip("[]")
      elif line and section == runtime_accelerator:
        requirement = Requirement(line)
        versions[canonicalize_name(requirement.name)] = pinned_version(requirement)
  if not versions:
    raise ValueError(f"{path} has no [{runtime_accelerator}] section.")
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

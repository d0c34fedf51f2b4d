"""What notebooks/colab.ipynb needs from the environment it finds: the machine's accelerator, the
packages the environment lacks or has outside the project's supported ranges, the JAX build for
the accelerator (kept where one is installed), whether the session must restart, and where the
chosen scheme trains.

The supported ranges are pyproject.toml's `[project] dependencies`, declared once; a package
missing or outside its range is installed at the version CI tests on this Python (its pin in
requirements.txt), and nothing else is touched. The ImageNet packages (TensorFlow, tfds, Grain:
requirements-imagenet.txt) are not the notebook's: it installs none of them.

What it keeps imports together: jax beside a jaxlib the installed jax accepts, a CUDA plugin (and
its PJRT runtime) at jaxlib's version and of a CUDA the driver runs, libtpu at the version jax asks
for, never two CUDA builds at once; a set that would not import is brought to the pins.

It also reads the requirements files for the rest of the project (the accelerator report, the
packaging test): with `packaging`, the reader pip itself uses. Standard library and `packaging`
only (every Colab runtime has it, and so does an environment requirements.txt built, through its
packages' dependencies): it runs before anything is installed, and loads on a Python older than
the project's, to say so in one sentence (`python_sentence`). The notebook imports it as
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
  import tomllib  # Python 3.11's: imported here, so that this module loads on 3.10 to say so.
  with open(os.path.join(root, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


# The oldest Python the project runs on: pyproject.toml's requires-python (a test holds the two
# equal; this module cannot read the file on an older Python, which has no tomllib).
OLDEST_PYTHON = (3, 11)


def python_sentence(version_info=sys.version_info) -> str | None:
  """One sentence when `version_info` is older than the project's oldest Python, with the way
  out; None where it is supported."""
  if tuple(version_info[:2]) >= OLDEST_PYTHON:
    return None
  running = ".".join(map(str, version_info[:3]))
  oldest = ".".join(map(str, OLDEST_PYTHON))
  return (f"This project runs on Python {oldest} or newer, and this runtime runs Python "
          f"{running}: choose a newer runtime (on Colab: Runtime → Change runtime type, the latest "
          f"runtime version), then run this cell again.")


def supported_ranges(root: str, *, extra: str | None = None,
                     environment: Mapping[str, str] | None = None) -> list[Requirement]:
  """The supported ranges the project declares (pyproject.toml's `dependencies`, or its optional
  `extra`) whose markers hold in `environment`."""
  project = pyproject(root)
  lines = project["optional-dependencies"][extra] if extra else project["dependencies"]
  return _holding(map(Requirement, lines), environment)


# --- The machine ----------------------------------------------------------------------------

# JAX's accelerator builds: the extra of `jax` that installs each, and the distribution whose
# presence says it is installed; a CUDA plugin runs on the PJRT runtime of its own version.
BUILD_DISTRIBUTIONS = {"cuda12": "jax-cuda12-plugin", "cuda13": "jax-cuda13-plugin",
                       "tpu": "libtpu"}
PJRT_DISTRIBUTIONS = {"cuda12": "jax-cuda12-pjrt", "cuda13": "jax-cuda13-pjrt"}
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


@dataclasses.dataclass(frozen=True)
class Build:
  """JAX's build for the accelerator.

  Attributes:
    name: "cuda12", "cuda13", "tpu"; None on a CPU.
    note: why that build, in a few words.
    remove: installed distributions of another CUDA build, which cannot run beside this one (two
      plugins register one platform) or on this driver.
  """
  name: str | None
  note: str
  remove: tuple[str, ...] = ()


def _cuda_builds_the_driver_runs(driver: str | None) -> tuple[str, ...]:
  """The CUDA builds a driver runs, newest first (both where its version cannot be read)."""
  if driver is not None and int(driver.split(".")[0]) < CUDA13_DRIVER:
    return ("cuda12",)
  return ("cuda13", "cuda12")


def jax_build(runtime_accelerator: str, *, version: Callable[[str], str | None],
              driver: str | None) -> Build:
  """The JAX build the accelerator needs, and why.

  On a GPU an installed CUDA build is kept where the driver runs it (the one at jaxlib's version,
  where two are); a CUDA 13 build on a driver below 580 is replaced by CUDA 12. Where none is
  kept, the driver picks: CUDA 13 from driver 580 on, CUDA 12 below it or where the driver's
  version cannot be read. Every other CUDA build installed is removed.
  """
  if runtime_accelerator == "tpu":
    return Build("tpu", "libtpu")
  if runtime_accelerator != "gpu":
    return Build(None, "no accelerator")
  runs = _cuda_builds_the_driver_runs(driver)
  installed = [b for b in ("cuda13", "cuda12") if version(BUILD_DISTRIBUTIONS[b])]
  usable = [b for b in installed if b in runs]
  if usable:
    jaxlib = version("jaxlib")
    at_jaxlib = [b for b in usable if _same(version(BUILD_DISTRIBUTIONS[b]), jaxlib)]
    build = (at_jaxlib or usable)[0]
    note = f"as {BUILD_DISTRIBUTIONS[build]} is installed"
  elif installed:  # only builds the driver cannot run: a CUDA 13 plugin on a driver below 580.
    build = "cuda12"
    note = (f"as driver {driver} runs CUDA 12, not the installed "
            f"{BUILD_DISTRIBUTIONS[installed[0]]}'s 13 (needs {CUDA13_DRIVER})")
  elif driver is None:
    build, note = "cuda12", "as no CUDA build is installed and the driver's version is not known"
  elif "cuda13" in runs:
    build, note = "cuda13", f"as no CUDA build is installed and driver {driver} runs CUDA 13"
  else:
    build, note = "cuda12", (f"as no CUDA build is installed and driver {driver} runs CUDA 12, "
                             f"not 13 (needs {CUDA13_DRIVER})")
  remove = tuple(f"{name} {version(name)}" for other in installed if other != build
                 for name in (BUILD_DISTRIBUTIONS[other], PJRT_DISTRIBUTIONS[other])
                 if version(name))
  return Build(build, note, remove)


# --- The plan -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Install:
  """What bringing the environment into the supported ranges, as a set that imports, takes.

  Attributes:
    install: pip's arguments, one `name[extras]==version` each: the packages missing or outside
      their range, at this Python's pins; `jax[BUILD]` where JAX's accelerator build must come too.
    changes: for each package installed, `name: installed → version (why)`.
    kept: `name version` of each package already in its range, and agreeing with the others.
    build: the accelerator's JAX build (`jax_build`).
    remove: `name version` of each installed distribution to uninstall first (another CUDA
      build: one the driver cannot run, or a second one).
    names: every distribution the plan judged, kept or to install.
    replaces: the installed distributions whose version the plan changes: a session that imported
      one of them before the install runs the old one until it restarts.
  """
  install: tuple[str, ...]
  changes: tuple[str, ...]
  kept: tuple[str, ...]
  build: Build
  remove: tuple[str, ...]
  names: tuple[str, ...]
  replaces: tuple[str, ...]


def plan_install(root: str, runtime_accelerator: str, *,
                 version: Callable[[str], str | None] = installed_version,
                 requires: Callable[[str], list[str]] = installed_requires,
                 environment: Mapping[str, str] | None = None,
                 driver: str | None = None) -> Install:
  """What the environment needs, in the checkout at `root`, to run the project on
  `runtime_accelerator`: each package of the supported ranges (`supported_ranges`) that is missing
  or outside its range, at its pin for this Python (requirements.txt); jax and jaxlib both at their
  pins where either moves or the installed jax does not accept the installed jaxlib (its own
  metadata); and JAX's build for the accelerator (`jax_build`) where it is missing, at another
  version than the jaxlib that will run (a CUDA plugin and its PJRT runtime), or outside what that
  jax asks for (libtpu).

  Args:
    version: a distribution's installed version, or None (the environment's, by default).
    requires: an installed distribution's requirement lines.
    environment: the marker environment (default: this interpreter's).
    driver: the NVIDIA driver's version (accelerators.nvidia_driver_version()), or None.
  """
  pinned = {canonicalize_name(r.name): pinned_version(r)
            for r in pins(os.path.join(root, "requirements.txt"), environment=environment)}
  install, changes, kept, names = {}, [], {}, []

  def to_pin(name: str, why: str) -> None:
    install[name] = f"{name}=={pinned[name]}"
    kept.pop(name, None)
    changes.append(f"{name}: {version(name) or 'none'} → {pinned[name]} ({why})")

  for requirement in supported_ranges(root, environment=environment):
    name = canonicalize_name(requirement.name)
    names.append(name)
    have = version(name)
    if have is not None and requirement.specifier.contains(have, prereleases=True):
      kept[name] = f"{name} {have}"
    else:
      to_pin(name, "missing" if have is None else f"outside {requirement.specifier}")

  # jax and jaxlib run only as a pair: where one moves, the other moves to the pin tested beside
  # it; where neither does, the installed jax must accept the installed jaxlib.
  def pair(why: str) -> None:
    for name in ("jax", "jaxlib"):
      if name not in install and not _same(version(name), pinned[name]):
        to_pin(name, why)

  if {"jax", "jaxlib"} & set(install):
    pair("jax and jaxlib move together, to the versions tested together")
  elif refused := _jaxlib_refused(version=version, requires=requires):
    pair(refused)

  build = jax_build(runtime_accelerator, version=version, driver=driver)
  if build.name:
    distribution = BUILD_DISTRIBUTIONS[build.name]
    names.append(distribution)
    have = version(distribution)
    jaxlib_version = pinned["jaxlib"] if "jaxlib" in install else version("jaxlib")
    if build.name == "tpu":  # libtpu: the version the installed jax asks for (its own metadata).
      met = have is not None and "jax" not in install and _extra_met(
          "jax", build.name, version=version, requires=requires)
    else:  # a CUDA plugin runs only beside the jaxlib, and the PJRT runtime, of its own version.
      met = (_same(have, jaxlib_version) and
             _same(version(PJRT_DISTRIBUTIONS[build.name]), have))
    if met:
      kept[distribution] = f"{distribution} {have}"
    else:
      jax_version = pinned["jax"] if "jax" in install else version("jax")
      if not _same(jax_version, jaxlib_version):  # jax[BUILD]==V brings jaxlib V: the pins.
        pair(f"jax[{build.name}] brings jax and jaxlib of one version")
        jax_version, jaxlib_version = pinned["jax"], pinned["jaxlib"]
      install["jax"] = f"jax[{build.name}]=={jax_version}"
      if build.name == "tpu":
        target, why = f"the one jax {jax_version} asks for", "missing" if have is None else (
            "another than jax asks for")
      else:
        target, why = jaxlib_version, "missing" if have is None else (
            "at jaxlib's version, with its PJRT runtime")
      changes.append(f"{distribution}: {have or 'none'} → {target} (jax[{build.name}]: {why})")
  replaces = tuple(n for n in names if version(n) is not None and n not in kept)
  return Install(tuple(install.values()), tuple(changes), tuple(kept.values()), build,
                 build.remove, tuple(names), replaces)


def _jaxlib_refused(*, version, requires) -> str | None:
  """Why the installed jax does not run with the installed jaxlib (the jaxlib its own metadata
  asks for; the same version where it declares none), or None where it does."""
  jax, jaxlib = version("jax"), version("jaxlib")
  declared = [r for r in map(Requirement, requires("jax"))
              if canonicalize_name(r.name) == "jaxlib" and r.marker is None]
  if declared:
    accepted = declared[0].specifier
    if jaxlib is not None and accepted.contains(jaxlib, prereleases=True):
      return None
    return f"jax {jax} runs with jaxlib {accepted}, not {jaxlib}"
  return None if _same(jax, jaxlib) else f"jax {jax} runs with jaxlib {jax}, not {jaxlib}"


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
  """What the first cell says it found and will do: the build, what it keeps, removes and
  installs, and when a restart follows."""
  build = plan.build
  found = {"cpu": "No accelerator found: JAX runs on the CPU.",
           "gpu": f"NVIDIA GPU found: JAX's CUDA {(build.name or '')[4:]} build, {build.note}.",
           "tpu": "TPU found: JAX's TPU build (libtpu)."}[runtime_accelerator]
  lines = [found,
           f"Kept (in the supported ranges, pyproject.toml): {', '.join(plan.kept) or 'nothing'}."]
  if plan.remove:
    lines.append(f"To remove: {', '.join(plan.remove)} (JAX loads one CUDA build).")
  lines.append(f"To install: {'; '.join(plan.changes)}." if plan.install else
               "Nothing to install.")
  if plan.replaces:
    lines.append(f"It replaces installed {', '.join(plan.replaces)}: if this session imported one "
                 f"of them before this cell, the cell ends asking for a restart.")
  return "\n".join(lines)


# The pins of each JAX build, for the sentence that says how to install what is missing.
REQUIREMENTS_FILES = {None: "requirements.txt", "cuda12": "requirements-cuda12.txt",
                      "cuda13": "requirements-cuda13.txt", "tpu": "requirements-tpu.txt"}


def missing_sentence(plan: Install, *, pip_failed: str | None = None) -> str:
  """One sentence: what this environment lacks (or holds that cannot load), and how to put it
  right — with INSTALL off, or where pip failed to "install" (no package index reachable, most
  often) or to "remove" (`pip_failed`)."""
  file = REQUIREMENTS_FILES[plan.build.name]
  removal = f"pip uninstall {' '.join(item.split()[0] for item in plan.remove)}"
  if pip_failed == "remove":
    return (f"pip could not remove {', '.join(plan.remove)} (its message is above): {removal} "
            f"where you can, then run this cell again.")
  if pip_failed == "install":
    return (f"pip could not install {', '.join(plan.install)} (its message is above): install "
            f"them where a package index is reachable (pip install -r {file} gives the versions "
            f"the tests ran with), then run this cell again.")
  lacks = (f"lacks {', '.join(plan.install)} (missing, or outside the versions the project runs "
           f"on: pyproject.toml)" if plan.install else "")
  holds = f"holds {', '.join(plan.remove)} (JAX loads one CUDA build)" if plan.remove else ""
  fix = f"{removal}, then pip install -r {file}" if plan.remove else f"pip install -r {file}"
  return (f"This environment {' and '.join(filter(None, (lacks, holds)))}: set INSTALL = True at "
          f"the top of this cell, or {fix}, then run this cell again.")


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


def pip_uninstall_command(remove) -> list[str]:
  """pip removing `remove` (`name version` each, as `Install.remove` lists them) from this
  kernel's Python."""
  return [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet",
          *(item.split()[0] for item in remove)]


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
  # The narrow network at batch 64, dropout 0.25, the rate 0.05 (0.025 at batch 64, linearly
  # scaled from 128), decayed × 0.1 after 60% of the steps. The test suite's rate, 0.1
  # (tests/train_test.py), let 1 of 8 seeds of the notebook's 300 steps collapse (seed 7: the loss
  # back at ln 10 from step 150, test top-1 44.7%; hybrid4, 2026-11-28, XLA:CPU at -O0). At 0.05
  # none of seeds 0-7 did (92.8-96.1%), nor seeds 8-15, run after the rate was chosen
  # (93.1-95.3%).
  return Run(config, True, {"global_batch_size": 64, "base_learning_rate": 0.05, "image_size": 64,
                            "dropout_rate": 0.25},
             "cpu",
             f"{config} needs {needed} devices and {where}: it runs on {needed} simulated CPU "
             f"devices, with the narrow _tiny network at 64².")

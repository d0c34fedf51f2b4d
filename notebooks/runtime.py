"""What notebooks/colab.ipynb needs from the runtime it finds: whether its JAX is one the project
supports, the packages to install (never the runtime's own JAX stack) and where the chosen scheme
trains. Standard library only: it runs before anything is installed."""

import dataclasses
import importlib.metadata
import operator
import re
import sys

# Colab's jax / jaxlib (and their CUDA plugin or libtpu), TensorFlow and TensorBoard are built for
# its runtime, and the kernel and test tools are the runtime's business: a pinned reinstall would
# leave the accelerator unmatched and JAX on the CPU.
NEVER_INSTALLED = frozenset({"jax", "jaxlib", "libtpu", "tensorflow", "tensorflow-cpu",
                             "tensorboard", "ipykernel", "pytest", "pytest-xdist", "nbclient",
                             "nbformat", "setuptools"})

# The runtime's devices the default run needs: below this the 1-device scheme trains.
DEFAULT_MULTI_DEVICE_CONFIG, DEFAULT_SINGLE_DEVICE_CONFIG = "hybrid4", "single"


# The JAX releases the suite runs on (CI: 0.10.2 on Python 3.11, 0.12 on Python 3.12; README).
OLDEST_JAX, NEWEST_JAX_SERIES = (0, 10, 2), (0, 12)


def _release(version: str) -> tuple[int, ...]:
  """(0, 12, 0, 1) of "0.12.0.1": the leading release numbers (a ".dev1" or "rc1" suffix dropped)."""
  return tuple(int(part) for part in re.match(r"\d+(?:\.\d+)*", version).group().split("."))


def unsupported_jax(version: str) -> str | None:
  """One sentence when the runtime's JAX `version` is outside the range the project supports,
  else None. The runtime's JAX is never replaced (it is built for the runtime's accelerator)."""
  release = _release(version)
  if OLDEST_JAX <= release and release[:2] <= NEWEST_JAX_SERIES:
    return None
  supported = (f"{'.'.join(map(str, OLDEST_JAX))} to "
               f"{'.'.join(map(str, NEWEST_JAX_SERIES))}.x")
  return (f"This runtime has JAX {version} and hybrid_parallel supports JAX {supported}: use a "
          f"runtime with such a JAX, or install one (pip install -r requirements-cuda13.txt, "
          f"-cuda12.txt or -tpu.txt) and restart the runtime.")


def _name(requirement: str) -> str:
  return re.split(r"[=<>!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne}


def _applies(requirement: str, python: tuple[int, ...]) -> bool:
  """Whether `requirement`'s environment marker, if any, holds for Python `python` (the markers
  of requirements.txt are all of the form `python_version OP "X.Y"`)."""
  if ";" not in requirement:
    return True
  marker = re.fullmatch(r'\s*python_version\s*(<=|>=|==|!=|<|>)\s*"([\d.]+)"\s*',
                        requirement.split(";", 1)[1])
  if not marker:
    raise ValueError(f"requirements.txt has a marker this notebook cannot read: {requirement}")
  return _COMPARE[marker.group(1)](python[:2], _release(marker.group(2)))


def _installed(name: str) -> bool:
  try:
    importlib.metadata.distribution(name)
    return True
  except importlib.metadata.PackageNotFoundError:
    return False


def requirements_to_install(requirements_txt: str, *, installed=_installed,
                            python: tuple[int, ...] = sys.version_info[:2]) -> list[str]:
  """The pinned requirements (lines of requirements.txt) for this `python` that the runtime
  lacks, less NEVER_INSTALLED, without their markers."""
  wanted = [line.split("#")[0].strip() for line in requirements_txt.splitlines()]
  return [r.split(";")[0].strip() for r in wanted
          if r and _applies(r, python) and _name(r) not in NEVER_INSTALLED
          and not installed(_name(r))]


def pip_command(missing: list[str]) -> list[str]:
  """pip installing `missing` while holding the runtime's jax and jaxlib at their versions: pip
  then fails (and says why) rather than replace them."""
  held = [f"{name}=={importlib.metadata.version(name)}" for name in ("jax", "jaxlib")
          if _installed(name)]
  return [sys.executable, "-m", "pip", "install", "--quiet", *missing, *held]


@dataclasses.dataclass(frozen=True)
class Run:
  """The config the notebook trains, its changes, and where it runs."""
  config: str
  narrow: bool  # the config's model replaced by its `_tiny` variant.
  overrides: dict  # config fields set after that.
  platform: str  # where the mesh runs: the runtime's accelerator, or "cpu".
  note: str  # one line saying where and why.


def choose_run(config: str | None, *, platform: str, device_count: int,
               mesh_devices: dict[str, int]) -> Run:
  """Where `config` (None: the default for this runtime) trains.

  The default is `hybrid4` where the runtime has 4 or more devices (Colab's 8 TPU cores, a CPU
  runtime's simulated devices) and the 1×1 `single` on a 1-GPU runtime. On an accelerator the
  network trains at the papers' 224² in bfloat16; a mesh larger than the accelerator runs on
  simulated CPU devices, narrowed to the `_tiny` network so that a few hundred steps take a minute.

  Args:
    config: a file of configs/ by name, or None.
    platform: jax.default_backend().
    device_count: jax.device_count().
    mesh_devices: each config's mesh size (data × model), by name.
  """
  if config is None:
    config = (DEFAULT_MULTI_DEVICE_CONFIG if platform == "cpu" or device_count >= 4
              else DEFAULT_SINGLE_DEVICE_CONFIG)
  needed = mesh_devices[config]
  if platform != "cpu" and needed <= device_count:
    return Run(config, False, {"dtype": "bfloat16", "image_size": 224}, platform,
               f"{config}: {needed} of this runtime's {device_count} {platform} device(s), "
               f"224² inputs, bfloat16.")
  where = ("this runtime has no accelerator" if platform == "cpu" else
           f"this runtime has {device_count} {platform} device(s)")
  # The narrow network at the test suite's settings (tests/train_test.py): batch 64, rate 0.1.
  return Run(config, True, {"global_batch_size": 64, "base_learning_rate": 0.1, "image_size": 64},
             "cpu",
             f"{config} needs {needed} devices and {where}: it runs on {needed} simulated CPU "
             f"devices, with the narrow _tiny network at 64².")

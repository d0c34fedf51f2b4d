"""The ("data", "model") device mesh: names, construction, validation, and shardings on it."""

from collections.abc import Sequence

import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from hybrid_parallel import checks
from hybrid_parallel.errors import UserError

# The two mesh axes. Every module imports these names from here.
DATA = "data"
MODEL = "model"
AXES = (DATA, MODEL)


def make_mesh(data: int, model: int, *, devices: Sequence[jax.Device] | None = None,
              auto_axes: bool = False) -> Mesh:
  """Builds the `data × model` mesh over the first `data * model` of `devices`.

  Args:
    data: size of the "data" axis (how many ways the batch is split).
    model: size of the "model" axis (how many ways filters / neurons are split).
    devices: the devices to use; defaults to `jax.devices()`.
    auto_axes: Auto axis types, for the GSPMD backend (XLA propagates the shardings), instead
      of Explicit (JAX's default; the shard_map schemes state every sharding themselves).

  Returns:
    A mesh with axes ("data", "model").

  Raises:
    UserError: if a size is not a positive integer or there are too few devices.
  """
  for name, size in ((DATA, data), (MODEL, model)):
    checks.integer(1)(f"mesh.{name}", size)
  devices = list(jax.devices() if devices is None else devices)
  needed = data * model
  if needed > len(devices):
    kind = devices[0].platform if devices else "jax"
    raise UserError(
        f"the mesh {data}×{model} needs {needed} devices but only {len(devices)} {kind} "
        f"device(s) are available; shrink mesh.data / mesh.model or run on more devices.")
  axis_type = AxisType.Auto if auto_axes else AxisType.Explicit
  return jax.make_mesh((data, model), AXES, axis_types=(axis_type,) * 2, devices=devices[:needed])


def pick_devices(data: int, model: int, *,
                 cpu_stand_ins: bool = False) -> tuple[list[jax.Device], str | None]:
  """Chooses where the `data × model` mesh runs: on the default backend's devices, or on CPU
  stand-ins where the accelerators cannot hold it and they were asked for (`cpu_stands_in`).

  Args:
    data, model: the mesh's sizes.
    cpu_stand_ins: whether simulated CPU devices were asked for (`platforms.start(cpu_devices=)`,
      main.py's --cpu_devices) to stand in for missing accelerators.

  Returns:
    The devices, and a one-line note when the CPU devices stand in for missing accelerators.

  Raises:
    UserError: accelerators too few for the mesh, and no stand-ins asked for.
  """
  default = jax.devices()
  platform = default[0].platform
  if not cpu_stands_in(data, model, platform=platform, available=len(default),
                       cpu_stand_ins=cpu_stand_ins):
    return default, None
  cpus = jax.devices("cpu")
  return cpus, (f"{len(default)} {platform.upper()} device(s) cannot hold the {data}×{model} "
                f"mesh; running on {len(cpus)} simulated CPU devices instead, as asked.")


def cpu_stands_in(data: int, model: int, *, platform: str, available: int,
                  cpu_stand_ins: bool) -> bool:
  """Whether simulated CPU devices run the `data × model` mesh instead of the default backend's
  `available` devices of `platform`.

  The CPU backend runs the mesh on its own (simulated) devices: no accelerator is present, or the
  user chose the CPU. Accelerators that can hold the mesh run it. Accelerators that cannot run
  nothing: CPU stand-ins take their place only where they were asked for (`cpu_stand_ins`) —
  a mesh trained on simulated devices is many times slower, never what a user of an accelerator
  expects without asking.

  Raises:
    UserError: `available` accelerators cannot hold the mesh and no stand-ins were asked for.
  """
  needed = data * model
  if platform == "cpu" or available >= needed:
    return False
  if cpu_stand_ins:
    return True
  raise UserError(
      f"the {data}×{model} mesh needs {needed} devices but JAX has {available} "
      f"{platform.upper()} device(s) here: choose a mesh that fits them (config.mesh.data × "
      f"config.mesh.model at most {available}), or ask for {needed} simulated CPU devices to stand in with "
      f"--cpu_devices={needed} (platforms.start(cpu_devices={needed}) from Python), which run "
      f"many times slower.")


def shardings(mesh: Mesh, specs):
  """The tree of `NamedSharding`s on `mesh` for a tree of PartitionSpecs (same structure)."""
  return jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs,
                      is_leaf=lambda x: isinstance(x, PartitionSpec))

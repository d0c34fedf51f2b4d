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


def pick_devices(needed: int) -> tuple[list[jax.Device], str | None]:
  """Chooses where a mesh of `needed` devices runs.

  The default backend's devices when it has enough of them; otherwise the (possibly simulated) CPU
  devices, so that a laptop or a 1-GPU Colab can still run a 4-device scheme.

  Returns:
    The devices, and a one-line note when the CPU devices stand in for missing accelerators.
  """
  default = jax.devices()
  if len(default) >= needed or default[0].platform == "cpu":
    return default, None
  cpus = jax.devices("cpu")
  return cpus, (f"{len(default)} {default[0].platform} device(s) cannot hold a {needed}-device "
                f"mesh; running on {len(cpus)} CPU devices instead.")


def shardings(mesh: Mesh, specs):
  """The tree of `NamedSharding`s on `mesh` for a tree of PartitionSpecs (same structure)."""
  return jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs,
                      is_leaf=lambda x: isinstance(x, PartitionSpec))

"""The `pmap` baseline: the data-parallel step as the Flax examples write it.

`backend = "pmap"` (data and single schemes): one function per device under
`jax.pmap(axis_name="data")` — forward and backward on the device's shard of the batch with the
device's copy of the parameters, `lax.pmean` of the loss and of the whole gradient tree, the same
optax update on every device. No PartitionSpec, no shard_map of ours.

One departure from the examples: they keep a *stacked* copy of the state (`replicate`: a leading
device axis) and `unreplicate` it to evaluate or save. Here the state enters with `in_axes=None`
and leaves with `out_axes=None`: pmap takes the scheme's replicated global arrays as they are, so
the training loop, checkpoints and evaluation see the same state as under the other backends, and
the step itself — what the benchmark compares — is the examples' step. (Since JAX 0.8, `pmap` is
itself lowered to `jit` of a `shard_map` over a one-axis mesh; the comparison shows what that
costs against the hand-placed collectives of `explicit.py`.)

Per-worker batch norm works as in `explicit.py`: the pmapped axis is named "data", the axis the
model's layers average their statistics over.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from hybrid_parallel import compiler_options, models, partitioning
from hybrid_parallel.mesh import DATA
from hybrid_parallel.steps import common
from hybrid_parallel.train_state import TrainState


def make_train_step(model: models.Network, plan: partitioning.Plan, mesh, *, tx,
                    specs: TrainState, options: common.StepOptions):
  """Returns `train_step(state, images, labels) -> (state, metrics)` built on `jax.pmap`.

  The state is replicated over `mesh` (every spec P(), as `specs` say for the data and single
  schemes; `plan` only splits the batch); images and labels are global arrays split over "data",
  as the other backends take them. State donated; metrics equal the explicit step's.
  The pmapped function is called inside a `jax.jit`, only to compile it with `compiler_options`
  (pmap itself takes no compiler options; it is already a jit of a shard_map, which inlines).
  """
  del plan, specs  # the examples' step: the batch over every device, the state replicated.
  devices = list(mesh.devices.flat)

  def per_device_step(state: TrainState, images_BHWC, labels_B):
    local_batch = images_BHWC.shape[0]
    ids_B = jax.lax.axis_index(DATA) * local_batch + jnp.arange(local_batch)

    out = common.loss_and_grads(model, state.params,
                                common.DeviceBatch(images_BHWC, labels_B, ids_B),
                                batch_stats=state.batch_stats, key=common.dropout_key(state),
                                normaliser=local_batch)
    # Equal shards, so the mean of the devices' mean gradients is the whole batch's.
    grads = jax.lax.pmean(out.grads, DATA)
    finite = common.all_finite(grads)
    new_state = common.apply_gradients(state, grads, batch_stats=out.batch_stats, tx=tx,
                                       finite=finite,
                                       skip_nonfinite=options.skip_nonfinite_steps)
    metrics = common.step_metrics(loss=jax.lax.pmean(out.loss, DATA),
                                  correct=jax.lax.psum(out.correct, DATA),
                                  examples=local_batch * len(devices), finite=finite)
    return new_state, metrics

  pmapped = jax.pmap(per_device_step, axis_name=DATA, in_axes=(None, 0, 0), out_axes=None,
                     devices=devices)
  replicated = NamedSharding(mesh, P())

  def train_step(state, images_BHWC, labels_B):
    # The examples' `shard`: [device, per-device batch, ...], the device axis mapped by pmap.
    split = lambda x: x.reshape(len(devices), x.shape[0] // len(devices), *x.shape[1:])
    return pmapped(state, split(images_BHWC), split(labels_B))

  # pmap answers on its own one-axis mesh of the same devices; the out shardings name the
  # scheme's mesh again, so the state goes on as the other backends leave it.
  return compiler_options.jit(train_step, mesh, tuned=options.tune_xla_cpu, outside_mesh=True,
                              donate_argnums=0, out_shardings=(replicated, replicated))

"""The GSPMD baseline: the whole network as one global program, partitioned by XLA.

`backend = "gspmd"` gives `jax.jit` the very PartitionSpecs the explicit schemes use — the
state's (`train_state.state_specs`) and the batch's (`plan.batch_spec`) — over a mesh with Auto
axes, and the single-device network (`Layout()`: whole layers, no collectives). There is no
shard_map and no hand-written collective: XLA's SPMD partitioner decides where activations are
gathered, gradients reduced and tensors resharded. Same inputs, same initial state, same dropout
masks (per-example, by global batch position) — so the same numbers as the explicit step, reached
by whatever communication XLA chose (`python -m benchmarks.communication.comm_volume --config=...
--config.backend=gspmd` counts it).

What it cannot express, `common.check_backend` refuses: per-worker batch-norm statistics (the
global program normalises over the whole batch: use sync_batch_norm), the ppermute reduction
algorithms, microbatches and the local-SGD schemes.
"""

import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from hybrid_parallel import compiler_options, models, partitioning
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.steps import common
from hybrid_parallel.train_state import TrainState


def make_train_step(model: models.Network, plan: partitioning.Plan, mesh, *, tx,
                    specs: TrainState, options: common.StepOptions):
  """Returns `train_step(state, images, labels) -> (state, metrics)`, jitted with the plan's
  shardings, state donated; the metrics equal the explicit step's."""
  whole = model.clone(layout=models.Layout())

  def train_step(state: TrainState, images_BHWC, labels_B):
    local_batch = images_BHWC.shape[0]  # the whole batch: the global program has one device.
    batch = common.DeviceBatch(images_BHWC, labels_B, jnp.arange(local_batch))
    out = common.loss_and_grads(whole, state.params, batch, batch_stats=state.batch_stats,
                                key=common.dropout_key(state), normaliser=local_batch)
    finite = common.all_finite(out.grads)
    new_state = common.apply_gradients(state, out.grads, batch_stats=out.batch_stats, tx=tx,
                                       finite=finite,
                                       skip_nonfinite=options.skip_nonfinite_steps)
    metrics = common.step_metrics(loss=out.loss, correct=out.correct, examples=local_batch,
                                  finite=finite)
    return new_state, metrics

  shardings = mesh_lib.shardings(mesh, specs)
  batch = NamedSharding(mesh, plan.batch_spec)
  return compiler_options.jit(train_step, mesh, tuned=options.tune_xla_cpu,
                              in_shardings=(shardings, batch, batch),
                              out_shardings=(shardings, NamedSharding(mesh, P())),
                              donate_argnums=0)

"""The GSPMD baseline: the whole network as one global program, partitioned by XLA.

`config.backend = "gspmd"` gives `jax.jit` the very PartitionSpecs the explicit schemes use — the
state's (`partitioning.state_specs`) and the batch's (`plan.batch_spec`) — over a mesh with Auto
axes, and the single-device network (`Layout()`: whole layers, no collectives). There is no
shard_map and no hand-written collective: XLA's SPMD partitioner decides where activations are
gathered, gradients reduced and tensors resharded. Same inputs, same initial state, same dropout
masks (per-example, by global batch position) — so the same numbers as the explicit step, reached
by whatever communication XLA chose (`benchmarks/comm_volume.py --backend=gspmd` counts it).

What it cannot express, it refuses: per-worker batch-norm statistics (the global program
normalises over the whole batch: use sync_batch_norm), the ppermute reduction algorithms, and
microbatches.
"""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from hybrid_parallel import models, partitioning, step, xla_options
from hybrid_parallel.errors import UserError
from hybrid_parallel.train_state import TrainState


def check_supported(config, arch: models.Architecture) -> None:
  """One UserError for a setting the global program cannot reproduce."""
  if arch.batch_norm and not config.sync_batch_norm:
    raise UserError("backend 'gspmd' normalises batch-norm layers over the whole batch; set "
                    "sync_batch_norm = True (per-worker statistics need the explicit backend).")
  if config.grad_reduce != "psum":
    raise UserError(f"backend 'gspmd' lets XLA choose the gradient reduction; grad_reduce "
                    f"{config.grad_reduce!r} needs the explicit backend.")
  if config.microbatches > 1:
    raise UserError("microbatches need the explicit backend.")


def make_train_step(model: models.AlexNet, plan: partitioning.Plan, mesh, tx, specs: TrainState,
                    skip_nonfinite: bool = False, tune_xla_cpu: bool = True):
  """Returns `train_step(state, images, labels) -> (state, metrics)`, jitted with the plan's
  shardings, state donated; the metrics equal the explicit step's."""
  whole = model.clone(layout=models.Layout())

  def train_step(state: TrainState, images_BHWC, labels_B):
    (loss, logits_BC, batch_stats), grads = step.mean_loss_and_grads(
        whole, state, images_BHWC, labels_B, jnp.arange(images_BHWC.shape[0]))
    finite = step.all_finite(grads)
    new_state = step.apply_gradients(state, grads, batch_stats, tx, finite, skip_nonfinite)
    metrics = {"train_loss": loss,
               "train_accuracy": jnp.mean(jnp.argmax(logits_BC, -1) == labels_B),
               "nonfinite_grads": 1.0 - finite.astype(jnp.float32)}
    return new_state, metrics

  shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs,
                           is_leaf=lambda x: isinstance(x, P))
  batch = NamedSharding(mesh, plan.batch_spec)
  return xla_options.jit(train_step, mesh, tune_xla_cpu, in_shardings=(shardings, batch, batch),
                         out_shardings=(shardings, NamedSharding(mesh, P())), donate_argnums=0)

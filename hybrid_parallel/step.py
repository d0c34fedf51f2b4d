"""Train and eval steps of the synchronous schemes: one `jax.jit` over `jax.shard_map`s.

Every device runs the model on its local shard with local parameter shapes; the model issues the
activation collectives its layout needs, and the step sums each gradient over exactly the mesh
axes its layer's batch is split over (`partitioning.grad_axes`), with the configured algorithm
(`collectives`). The loss is normalised by the *global* batch, so the summed gradient is the
gradient of the single-device loss on the same batch. See `make_train_step` for why the step has
two shard_map regions.
"""

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import collectives, layers, models, partitioning, xla_options
from hybrid_parallel.train_state import TrainState


def example_ids(plan: partitioning.Plan, local_batch: int) -> jax.Array:
  """Global batch positions of this device's examples (the batch is split in mesh order)."""
  ids = jnp.arange(local_batch, dtype=jnp.int32)
  if plan.conv_batch_axes:
    ids = ids + jax.lax.axis_index(plan.conv_batch_axes) * local_batch
  return ids


def _to_fc_batch(plan: partitioning.Plan, x: jax.Array) -> jax.Array:
  """Per-example values of the conv-stage batch, gathered as the model gathers the features."""
  return layers.replicate_over_model(x, axis=0) if plan.layout.conv_batch_over_model else x


def _sum_over_batch(plan: partitioning.Plan, x):
  return collectives.allreduce_sum(x, plan.fc_batch_axes)


def dropout_key(state) -> jax.Array:
  """The dropout key of the step about to run: a function of (seed, step) only.

  `state` is any state with the run's root key data `rng` and the update count `step`.
  """
  return jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)


def mean_loss_and_grads(model: models.AlexNet, state: TrainState, images_BHWC, labels_B,
                        example_ids_B):
  """Mean cross-entropy of `images_BHWC` under `state`, its gradient and what the forward pass
  returned: `(loss, logits_BC, batch_stats), grads`. Dropout is keyed by `example_ids_B`.

  The whole-batch step of the gspmd and pmap backends (the explicit step sums over slices).
  """

  def loss_fn(params):
    logits_BC, updated = model.apply({"params": params, "batch_stats": state.batch_stats},
                                     images_BHWC, example_ids_B=example_ids_B,
                                     dropout_key=dropout_key(state), mutable=["batch_stats"])
    loss = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B).mean()
    return loss, (logits_BC, updated.get("batch_stats", {}))

  (loss, (logits_BC, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
      state.params)
  return (loss, logits_BC, batch_stats), grads


def all_finite(grads) -> jax.Array:
  """True when every gradient (of this device's shards) is finite."""
  return jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))


def apply_gradients(state: TrainState, grads, batch_stats, tx, finite: jax.Array,
                    skip_nonfinite: bool) -> TrainState:
  """The optimiser's update of `state` by the summed `grads`, one step counted.

  With `skip_nonfinite`, a step whose gradients are not all `finite` leaves the parameters,
  optimiser state and batch statistics as they were (the step count still advances, so the next
  step reads the next batch). Every backend's step ends here.
  """
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  new_state = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                            opt_state=opt_state, batch_stats=batch_stats)
  if skip_nonfinite:
    new_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), new_state,
                             state.replace(step=state.step + 1))
  return new_state


def make_train_step(model: models.AlexNet, plan: partitioning.Plan, mesh, tx,
                    specs: TrainState, grad_reduce: str = "psum", microbatches: int = 1,
                    skip_nonfinite: bool = False, tune_xla_cpu: bool = True):
  """Returns `train_step(state, images, labels) -> (state, metrics)`, jitted, state donated.

  One XLA program in two shard_map regions:
    1. gradients (replication-checked, so autodiff through the model's collectives is exact):
       each device's partial gradient, stacked over the axes it must be summed over;
    2. reduction and update (unchecked): the partial gradients summed with `grad_reduce`, then the
       optax update on each shard. The ppermute algorithms leave sums that are equal on every
       device but that the checker cannot prove so, hence the unchecked region.

  With `microbatches` = k > 1 each device splits its shard of the batch into k slices and
  accumulates their gradients in a `lax.scan` before the one reduction and update: the update of
  the whole batch with the activation memory of a k-th of it. Examples keep their global batch
  positions, so dropout masks — and hence the update — equal those of the one-pass step (batch
  norm, if any, normalises each slice with its own statistics, as any accumulation does).

  Args:
    model: the network with `plan.layout` (per-device widths).
    plan: the scheme's plan.
    mesh: the ("data", "model") mesh.
    tx: the optax optimiser.
    specs: PartitionSpecs of the state (`train_state.create`).
    grad_reduce: all-reduce algorithm for the gradients (`collectives.ALGORITHMS`).
    microbatches: passes per step over slices of each device's batch.
    skip_nonfinite: a step whose summed gradients hold a NaN or Inf leaves the parameters,
      optimiser state and batch statistics as they were (the step count still advances, so the
      next step reads the next batch). Either way the metric `nonfinite_grads` reports it.
    tune_xla_cpu: compile with `xla_options`' CPU options (on a CPU mesh).
  """
  collectives.check_algorithm(grad_reduce)
  grad_specs = partitioning.partial_grad_specs(specs.params, plan)

  def slice_grads(params, batch_stats, key, images_BHWC, labels_B, example_ids_B,
                  global_batch):
    """Partial gradient and (loss, correct) sums of one slice of this device's batch."""
    labels_fc_B = _to_fc_batch(plan, labels_B)

    def loss_fn(params):
      variables = {"params": params, "batch_stats": batch_stats}
      logits_BC, updated = model.apply(variables, images_BHWC, example_ids_B=example_ids_B,
                                       dropout_key=key, mutable=["batch_stats"])
      losses_B = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_fc_B)
      return losses_B.sum() / global_batch, (logits_BC, updated.get("batch_stats", {}))

    (loss, (logits_BC, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    correct = jnp.sum(jnp.argmax(logits_BC, -1) == labels_fc_B)
    return grads, batch_stats, loss, correct

  def per_device_grads(state: TrainState, images_BHWC, labels_B):
    local_batch = images_BHWC.shape[0]
    global_batch = local_batch * plan.batch_divisor
    ids_B = example_ids(plan, local_batch)
    key = dropout_key(state)
    # Parameters are replicated over their layer's batch axes; marking them device-varying there
    # makes autodiff return each device's partial gradient instead of summing it implicitly.
    params = partitioning.map_with_grad_axes(
        lambda p, axes: jax.lax.pcast(p, axes, to="varying") if axes else p, state.params, plan)
    if microbatches == 1:
      grads, batch_stats, loss, correct = slice_grads(
          params, state.batch_stats, key, images_BHWC, labels_B, ids_B, global_batch)
    else:
      def accumulate(carry, batch_slice):
        grads_sum, batch_stats, loss_sum, correct_sum = carry
        grads, batch_stats, loss, correct = slice_grads(params, batch_stats, key, *batch_slice,
                                                        global_batch)
        return (jax.tree.map(jnp.add, grads_sum, grads), batch_stats, loss_sum + loss,
                correct_sum + correct), None

      split = lambda x: x.reshape(microbatches, local_batch // microbatches, *x.shape[1:])
      zero_grads = jax.tree.map(jnp.zeros_like, params)
      zero = jnp.zeros((), jnp.float32)
      if plan.fc_batch_axes:  # the loss sums vary over the FC stage's batch axes.
        zero = jax.lax.pcast(zero, plan.fc_batch_axes, to="varying")
      (grads, batch_stats, loss, correct), _ = jax.lax.scan(
          accumulate, (zero_grads, state.batch_stats, zero, zero.astype(jnp.int32)),
          (split(images_BHWC), split(labels_B), split(ids_B)))
    metrics = {"train_loss": _sum_over_batch(plan, loss),
               "train_accuracy": _sum_over_batch(plan, correct) / global_batch}
    return partitioning.map_with_grad_axes(lambda g, axes: g[None] if axes else g, grads,
                                           plan), batch_stats, metrics

  def per_device_update(state: TrainState, partial_grads, batch_stats):
    grads = partitioning.map_with_grad_axes(
        lambda g, axes: collectives.allreduce_sum(g[0], axes, grad_reduce) if axes else g,
        partial_grads, plan)
    # Every device checks its shards; the verdict is agreed over the whole mesh.
    finite = jax.lax.pmin(all_finite(grads).astype(jnp.int32), mesh.axis_names) > 0
    new_state = apply_gradients(state, grads, batch_stats, tx, finite, skip_nonfinite)
    return new_state, 1.0 - finite.astype(jnp.float32)

  batch = plan.batch_spec
  grads_fn = jax.shard_map(per_device_grads, mesh=mesh, in_specs=(specs, batch, batch),
                           out_specs=(grad_specs, specs.batch_stats, P()))
  update_fn = jax.shard_map(per_device_update, mesh=mesh,
                            in_specs=(specs, grad_specs, specs.batch_stats),
                            out_specs=(specs, P()), check_vma=False)

  def train_step(state, images_BHWC, labels_B):
    partial_grads, batch_stats, metrics = grads_fn(state, images_BHWC, labels_B)
    state, nonfinite = update_fn(state, partial_grads, batch_stats)
    return state, dict(metrics, nonfinite_grads=nonfinite)

  return xla_options.jit(train_step, mesh, tune_xla_cpu, donate_argnums=0)


def make_eval_step(model: models.AlexNet, plan: partitioning.Plan, mesh, variable_specs,
                   crops: int = 1, tune_xla_cpu: bool = True):
  """Returns `eval_step(variables, images, labels, weights) -> sums`, jitted.

  `variables` are the model's collections ({"params": ..., and "batch_stats" with batch norm}),
  placed with `variable_specs`. With `crops` > 1 the images are B×crops×H×W×C and an example's
  prediction is the mean of its crops' softmaxes (Krizhevsky et al.'s ten-crop evaluation); the
  loss is then −log of that mean at the label.

  `weights` is 1 for real examples and 0 for the padding of a last, partial batch. The sums
  (`eval_loss`, `eval_top1`, `eval_top5`, `count`) are over the whole global batch.
  """

  def log_probs(variables, images_BHWC):
    logits_BC = model.apply(variables, images_BHWC,
                            example_ids_B=example_ids(plan, images_BHWC.shape[0]))
    return jax.nn.log_softmax(logits_BC)

  def per_device_eval(variables, images, labels_B, weights_B):
    if crops == 1:
      log_probs_BC = log_probs(variables, images)
    else:  # one pass per crop, each with the layout's usual batch: crops never straddle devices.
      log_probs_KBC = jax.lax.map(lambda x: log_probs(variables, x), jnp.swapaxes(images, 0, 1))
      log_probs_BC = jax.nn.logsumexp(log_probs_KBC, axis=0) - jnp.log(crops)
    labels_B, weights_B = _to_fc_batch(plan, labels_B), _to_fc_batch(plan, weights_B)
    losses_B = -jnp.take_along_axis(log_probs_BC, labels_B[:, None], axis=-1)[:, 0]
    top5_BK = jax.lax.top_k(log_probs_BC, min(5, log_probs_BC.shape[-1]))[1]
    sums = {"eval_loss": jnp.sum(losses_B * weights_B),
            "eval_top1": jnp.sum((top5_BK[:, 0] == labels_B) * weights_B),
            "eval_top5": jnp.sum(jnp.any(top5_BK == labels_B[:, None], -1) * weights_B),
            "count": jnp.sum(weights_B)}
    return _sum_over_batch(plan, sums)

  batch = plan.batch_spec
  return xla_options.jit(jax.shard_map(per_device_eval, mesh=mesh,
                                       in_specs=(variable_specs, batch, batch, batch),
                                       out_specs=P()), mesh, tune_xla_cpu)

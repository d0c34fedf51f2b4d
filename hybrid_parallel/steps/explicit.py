"""The explicit backend: train and eval steps as one `jax.jit` over `jax.shard_map`s.

Every device runs the model on its local shard with local parameter shapes; the model issues the
activation collectives its layout needs, and the step sums each gradient over exactly the mesh
axes its layer's batch is split over (`partitioning.grad_axes`), with the configured algorithm
(`collectives`). The loss is normalised by the *global* batch, so the summed gradient is the
gradient of the single-device loss on the same batch.

A train step is two shard_map regions in one program (`two_region_step`):
  1. gradients (replication-checked, so autodiff through the model's collectives is exact): each
     device's partial gradient, stacked over the axes it must be summed over;
  2. reduction and update (unchecked): the partial gradients summed with `grad_reduce`, then the
     optax update on each shard. The ppermute algorithms leave sums that are equal on every
     device but that the checker cannot prove so, hence the unchecked region.
The plain step is `make_train_step`; Krizhevsky's owt variants (b) and (c) build theirs from the
same regions (steps/variable_batch.py); `accumulate_microbatches` wraps the gradient of one pass.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from hybrid_parallel import collectives, compiler_options, layers, models, partitioning
from hybrid_parallel.steps import common
from hybrid_parallel.steps.common import DeviceBatch, Gradients, StepOptions
from hybrid_parallel.train_state import TrainState


def device_batch(plan: partitioning.Plan, images_BHWC, labels_B) -> tuple[DeviceBatch, int]:
  """This device's examples with their global positions, and the global batch size."""
  local_batch = images_BHWC.shape[0]
  return (DeviceBatch(images_BHWC, labels_B, common.example_ids(plan, local_batch)),
          local_batch * plan.batch_divisor)


def vary_over_grad_axes(params, plan: partitioning.Plan):
  """Parameters replicated over their layer's batch axes, marked device-varying there: autodiff
  then returns each device's partial gradient instead of summing it implicitly."""
  return partitioning.map_with_grad_axes(
      lambda p, axes: jax.lax.pcast(p, axes, to="varying") if axes else p, params, plan)


def stack_partial_grads(grads, plan: partitioning.Plan):
  """Each partial gradient as one row of its stack over the axes it is summed over (the specs of
  `partitioning.partial_grad_specs`): no communication until region 2 sums the rows."""
  return partitioning.map_with_grad_axes(lambda g, axes: g[None] if axes else g, grads, plan)


def sum_partial_grads(partial_grads, plan: partitioning.Plan, algorithm: str):
  """The stacked partial gradients summed over their axes with `algorithm` (region 2)."""
  return partitioning.map_with_grad_axes(
      lambda g, axes: collectives.allreduce_sum(g[0], axes, algorithm) if axes else g,
      partial_grads, plan)


def agreed_finite(grads, mesh) -> jax.Array:
  """Whether every device's shards of `grads` are finite: each checks its own, the verdict is
  agreed over the whole mesh."""
  return collectives.all_agree(common.all_finite(grads), mesh.axis_names)


def sum_over_fc_batch(plan: partitioning.Plan, x):
  """Sums per-device sums over the devices that hold other examples of the FC stage."""
  return collectives.allreduce_sum(x, plan.fc_batch_axes)


def loss_and_grads(model: models.Network, plan: partitioning.Plan) -> Callable[..., Gradients]:
  """`(params, batch_stats, batch, *, key, global_batch) -> Gradients`: the gradient of this
  device's examples' loss (summed, ÷ the global batch), with `params` as
  `vary_over_grad_axes` marks them."""

  def gradients(params, batch_stats, batch: DeviceBatch, *, key, global_batch: int) -> Gradients:
    return common.loss_and_grads(model, params, batch, batch_stats=batch_stats, key=key,
                                 normaliser=global_batch,
                                 labels_B=common.to_fc_batch(plan, batch.labels_B))

  return gradients


def accumulate_microbatches(gradients: Callable[..., Gradients], plan: partitioning.Plan,
                            microbatches: int, *, loss_dtype) -> Callable[..., Gradients]:
  """`gradients` over `microbatches` equal slices of the device's batch, summed in a
  `lax.scan`: the update of the whole batch with the activation memory of a slice.

  Examples keep their global positions, so dropout masks — and the update — equal the one-pass
  step's (batch norm, if any, normalises each slice with its own statistics, as any
  accumulation does).
  """

  def accumulated(params, batch_stats, batch: DeviceBatch, *, key, global_batch: int):
    def add_slice(carry, batch_slice):
      total, batch_stats = carry
      out = gradients(params, batch_stats, batch_slice, key=key, global_batch=global_batch)
      return (jax.tree.map(jnp.add, total, (out.grads, out.loss, out.correct)),
              out.batch_stats), None

    slices = jax.tree.map(lambda x: x.reshape(microbatches, -1, *x.shape[1:]), batch)
    zero = jnp.zeros((), loss_dtype)
    if plan.fc_batch_axes:  # the loss sums vary over the FC stage's batch axes.
      zero = jax.lax.pcast(zero, plan.fc_batch_axes, to="varying")
    total = (jax.tree.map(jnp.zeros_like, params), zero, zero.astype(jnp.int32))
    ((grads, loss, correct), batch_stats), _ = jax.lax.scan(add_slice, (total, batch_stats),
                                                            slices)
    return Gradients(grads, batch_stats, loss, correct)

  return accumulated


def two_region_step(gradients, update, *, mesh, specs: TrainState, batch_spec: P, carried_specs,
                    tuned: bool):
  """The jitted, state-donating step of the two regions (module docstring).

  Args:
    gradients: region 1, `(state, images, labels) -> (carried, metrics)`.
    update: region 2, `(state, carried) -> (state, nonfinite)`.
    mesh: the ("data", "model") mesh.
    specs: PartitionSpecs of the state (`train_state.create`).
    batch_spec: the PartitionSpec of the images' and labels' batch axis (`plan.batch_spec`).
    carried_specs: PartitionSpecs of what region 1 hands region 2.
    tuned: compile with `compiler_options`' CPU step options.
  """
  grads_fn = jax.shard_map(gradients, mesh=mesh, in_specs=(specs, batch_spec, batch_spec),
                           out_specs=(carried_specs, P()))
  update_fn = jax.shard_map(update, mesh=mesh, in_specs=(specs, carried_specs),
                            out_specs=(specs, P()), check_vma=False)

  def train_step(state, images_BHWC, labels_B):
    carried, metrics = grads_fn(state, images_BHWC, labels_B)
    state, nonfinite = update_fn(state, carried)
    return state, dict(metrics, nonfinite_grads=nonfinite)

  return compiler_options.jit(train_step, mesh, tuned=tuned, donate_argnums=0)


def make_train_step(model: models.Network, plan: partitioning.Plan, mesh, *, tx,
                    specs: TrainState, options: StepOptions):
  """Returns `train_step(state, images, labels) -> (state, metrics)`, jitted, state donated.

  `model` has `plan.layout`; `specs` are the state's PartitionSpecs; with
  `options.microbatches` = k > 1 each device accumulates k slices of its batch
  (`accumulate_microbatches`). With `options.skip_nonfinite_steps` a step whose summed
  gradients hold a NaN or Inf leaves the parameters, optimiser state and batch statistics as
  they were (the step count still advances); the metric `nonfinite_grads` reports it either way.
  """
  gradients = loss_and_grads(model, plan)
  if options.microbatches > 1:
    gradients = accumulate_microbatches(gradients, plan, options.microbatches,
                                        loss_dtype=layers.at_least_float32(model.dtype))

  def per_device_gradients(state: TrainState, images_BHWC, labels_B):
    batch, global_batch = device_batch(plan, images_BHWC, labels_B)
    out = gradients(vary_over_grad_axes(state.params, plan), state.batch_stats, batch,
                    key=common.dropout_key(state), global_batch=global_batch)
    return ((stack_partial_grads(out.grads, plan), out.batch_stats),
            common.step_metrics(loss=sum_over_fc_batch(plan, out.loss),
                                correct=sum_over_fc_batch(plan, out.correct),
                                examples=global_batch))

  def per_device_update(state: TrainState, carried):
    partial_grads, batch_stats = carried
    grads = sum_partial_grads(partial_grads, plan, options.grad_reduce)
    finite = agreed_finite(grads, mesh)
    new_state = common.apply_gradients(state, grads, batch_stats=batch_stats, tx=tx,
                                       finite=finite,
                                       skip_nonfinite=options.skip_nonfinite_steps)
    return new_state, 1.0 - finite.astype(jnp.float32)

  carried_specs = (partitioning.partial_grad_specs(specs.params, plan), specs.batch_stats)
  return two_region_step(per_device_gradients, per_device_update, mesh=mesh, specs=specs,
                         batch_spec=plan.batch_spec, carried_specs=carried_specs,
                         tuned=options.tune_xla_cpu)


def make_eval_step(model: models.Network, plan: partitioning.Plan, mesh, *, variable_specs,
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
                            example_ids_B=common.example_ids(plan, images_BHWC.shape[0]))
    return jax.nn.log_softmax(logits_BC)

  def per_device_eval(variables, images, labels_B, weights_B):
    if crops == 1:
      log_probs_BC = log_probs(variables, images)
    else:  # one pass per crop, each with the layout's usual batch: crops never straddle devices.
      log_probs_KBC = jax.lax.map(lambda x: log_probs(variables, x), jnp.swapaxes(images, 0, 1))
      log_probs_BC = jax.nn.logsumexp(log_probs_KBC, axis=0) - jnp.log(crops)
    labels_B, weights_B = common.to_fc_batch(plan, labels_B), common.to_fc_batch(plan, weights_B)
    losses_B = -jnp.take_along_axis(log_probs_BC, labels_B[:, None], axis=-1)[:, 0]
    top5_BK = jax.lax.top_k(log_probs_BC, min(5, log_probs_BC.shape[-1]))[1]
    sums = {"eval_loss": jnp.sum(losses_B * weights_B),
            "eval_top1": jnp.sum((top5_BK[:, 0] == labels_B) * weights_B),
            "eval_top5": jnp.sum(jnp.any(top5_BK == labels_B[:, None], -1) * weights_B),
            "count": jnp.sum(weights_B)}
    return sum_over_fc_batch(plan, sums)

  batch = plan.batch_spec
  return compiler_options.jit(jax.shard_map(per_device_eval, mesh=mesh,
                                            in_specs=(variable_specs, batch, batch, batch),
                                            out_specs=P()), mesh, tuned=tune_xla_cpu)

"""The explicit backend: train and eval steps as one `jax.jit` over `jax.shard_map`s.

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

from hybrid_parallel import collectives, compiler_options, models, optim, partitioning
from hybrid_parallel.steps import common, variable_batch
from hybrid_parallel.train_state import TrainState


def _sum_over_batch(plan: partitioning.Plan, x):
  return collectives.allreduce_sum(x, plan.fc_batch_axes)


def make_train_step(model: models.AlexNet, plan: partitioning.Plan, mesh, tx,
                    specs: TrainState, *, grad_reduce: str = "psum", microbatches: int = 1,
                    skip_nonfinite: bool = False, tune_xla_cpu: bool = True,
                    owt_variant: str = "a", fc_updates_per_step: int = 1):
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
    tune_xla_cpu: compile with `compiler_options`' CPU step options (on a CPU mesh).
    owt_variant: how owt runs its FC layers: "a" (the model's gather), or the K passes of "b" or
      "c" (steps/variable_batch.py).
    fc_updates_per_step: 1, or K (= the model axis) for an FC update after every pass of "b" or
      "c"; `tx` is then the `optim.GroupedOptimizer` made with the same K. The FC updates happen
      in region 1, each pass's FC gradient summed over "data" with psum; region 2 sums and
      applies the conv gradients.
  """
  collectives.check_algorithm(grad_reduce)
  variable_batch.check(owt_variant, scheme=plan.scheme, model_axis=plan.model,
                       fc_updates_per_step=fc_updates_per_step, microbatches=microbatches)
  grad_specs = partitioning.partial_grad_specs(specs.params, plan)
  fc_per_pass = fc_updates_per_step > 1
  if fc_per_pass:  # only the conv gradients leave region 1.
    grad_specs = optim.split_groups(grad_specs)["conv"]
  routing = (variable_batch.collective_routing(owt_variant, plan.model, plan.fc_batch_axes)
             if owt_variant != "a" else None)

  def slice_grads(params, batch_stats, key, images_BHWC, labels_B, example_ids_B,
                  global_batch):
    """Partial gradient and (loss, correct) sums of one slice of this device's batch."""
    labels_fc_B = common.to_fc_batch(plan, labels_B)

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
    ids_B = common.example_ids(plan, local_batch)
    key = common.dropout_key(state)
    # Parameters are replicated over their layer's batch axes; marking them device-varying there
    # makes autodiff return each device's partial gradient instead of summing it implicitly.
    params = partitioning.map_with_grad_axes(
        lambda p, axes: jax.lax.pcast(p, axes, to="varying") if axes else p, state.params, plan)
    fc_out = ()
    if routing is not None:
      fc_update = None
      if fc_per_pass:
        fc_update = (tx.groups["fc"], optim.split_groups(state.params)["fc"],
                     state.opt_state["fc"])
      out = variable_batch.fc_passes(
          model, params, state.batch_stats, key, images_BHWC, labels_B, ids_B, global_batch,
          routing, vary=lambda tree: jax.tree.map(
              lambda p: jax.lax.pcast(p, plan.fc_batch_axes, to="varying"), tree)
          if plan.fc_batch_axes else tree, fc_update=fc_update)
      grads, batch_stats, loss, correct = out.grads, out.batch_stats, out.loss, out.correct
      if fc_per_pass:
        fc_finite = jax.lax.pmin(out.fc_finite.astype(jnp.int32), mesh.axis_names)
        fc_out = (out.fc_params, out.fc_opt_state, fc_finite)
    elif microbatches == 1:
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
    return (partitioning.map_with_grad_axes(lambda g, axes: g[None] if axes else g, grads, plan),
            batch_stats, metrics, *fc_out)

  def per_device_update(state: TrainState, partial_grads, batch_stats, *fc_out):
    grads = partitioning.map_with_grad_axes(
        lambda g, axes: collectives.allreduce_sum(g[0], axes, grad_reduce) if axes else g,
        partial_grads, plan)
    # Every device checks its shards; the verdict is agreed over the whole mesh.
    finite = jax.lax.pmin(common.all_finite(grads).astype(jnp.int32), mesh.axis_names) > 0
    if fc_per_pass:  # the FC layers were updated pass by pass in region 1.
      fc_params, fc_opt_state, fc_finite = fc_out
      finite = finite & (fc_finite > 0)
      new_state = variable_batch.apply_conv_gradients(
          state, grads, batch_stats, tx, fc_params=fc_params, fc_opt_state=fc_opt_state,
          finite=finite, skip_nonfinite=skip_nonfinite)
    else:
      new_state = common.apply_gradients(state, grads, batch_stats, tx, finite=finite,
                                         skip_nonfinite=skip_nonfinite)
    return new_state, 1.0 - finite.astype(jnp.float32)

  batch = plan.batch_spec
  fc_specs = ()
  if fc_per_pass:
    fc_specs = (optim.split_groups(specs.params)["fc"], specs.opt_state["fc"], P())
  grads_fn = jax.shard_map(per_device_grads, mesh=mesh, in_specs=(specs, batch, batch),
                           out_specs=(grad_specs, specs.batch_stats, P(), *fc_specs))
  update_fn = jax.shard_map(per_device_update, mesh=mesh,
                            in_specs=(specs, grad_specs, specs.batch_stats, *fc_specs),
                            out_specs=(specs, P()), check_vma=False)

  def train_step(state, images_BHWC, labels_B):
    partial_grads, batch_stats, metrics, *fc_out = grads_fn(state, images_BHWC, labels_B)
    state, nonfinite = update_fn(state, partial_grads, batch_stats, *fc_out)
    return state, dict(metrics, nonfinite_grads=nonfinite)

  return compiler_options.jit(train_step, mesh, tuned=tune_xla_cpu, donate_argnums=0)


def make_eval_step(model: models.AlexNet, plan: partitioning.Plan, mesh, variable_specs, *,
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
    return _sum_over_batch(plan, sums)

  batch = plan.batch_spec
  return compiler_options.jit(jax.shard_map(per_device_eval, mesh=mesh,
                                            in_specs=(variable_specs, batch, batch, batch),
                                            out_specs=P()), mesh, tuned=tune_xla_cpu)

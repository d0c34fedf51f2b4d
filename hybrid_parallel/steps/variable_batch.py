"""Krizhevsky 2014's schemes (b) and (c) for the FC stage of `owt`, and the variable batch size.

In scheme (a) (the models' default) every model device gathers the conv features of all K
workers of its data group and runs its FC slice on the whole K·b batch. In (b) and (c) the FC
stage runs in K passes of b rows each:

  (b) pass k: worker k's b feature rows go to every other worker (k sends them itself: K − 1
      point-to-point transfers), all run their FC slices forward and backward on them, and the
      feature gradients go back to worker k (the transposed transfers, summed at k);
  (c) pass k: every worker sends the k-th b/K of its rows to every worker (an all-gather of b/K
      rows), and the feature gradients come back by a reduce-scatter.

Each pass moves 1/K of (a)'s gather, and pass k + 1's transfer needs only the conv features, so
XLA may overlap it with pass k's FC compute.

`fc_updates_per_step` = 1: the FC gradients of the K passes are summed into one update, the same
as (a)'s (the loss is the same sum over the same examples). = K: the FC layers are updated after
every pass — with the gradient of the pass's mean loss, the next pass using the updated weights —
so they train at batch D·b while the conv layers train at batch D·K·b, Krizhevsky's "variable
batch size" (cuda-convnet2's `updatePeriod`). The conv layers are updated once per step, from the
feature gradients of all passes. The schedule's rate of the step applies to every pass
(optim.make_optimizer(fc_updates_per_step=K)); momentum and weight decay apply per update.

The same pass loop (`fc_passes`) runs inside the explicit backend's shard_map, where the row
routing is the collectives above, and on one device as the reference (`make_reference_step`),
where it is indexing: the distributed step must equal the reference.
"""

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import collectives, layers, models, optim, partitioning
from hybrid_parallel.errors import UserError
from hybrid_parallel.mesh import MODEL
from hybrid_parallel.steps import common, explicit
from hybrid_parallel.steps.common import DeviceBatch, StepOptions
from hybrid_parallel.train_state import TrainState

def check(variant: str, *, scheme: str, model_axis: int, fc_updates_per_step: int,
          local_batch: int | None = None, backend: str = "explicit",
          microbatches: int = 1) -> None:
  """One UserError for a combination the variants (common.OWT_VARIANTS) cannot run."""
  if fc_updates_per_step not in (1, model_axis):
    raise UserError(f"fc_updates_per_step must be 1 or the model-axis size {model_axis} (an FC "
                    f"update after every pass), got {fc_updates_per_step}.")
  if variant == "a":
    if fc_updates_per_step > 1:
      raise UserError("fc_updates_per_step > 1 needs the FC passes of owt_variant 'b' or 'c'.")
    return
  if scheme != "owt":
    raise UserError(f"owt_variant {variant!r} is a way of running owt's FC layers; parallelism "
                    f"{scheme!r} has no such choice (use owt_variant 'a').")
  if backend != "explicit":
    raise UserError(f"owt_variant {variant!r} needs the explicit backend, not {backend!r}.")
  if microbatches > 1:
    raise UserError(f"owt_variant {variant!r} runs its own passes; use microbatches = 1.")
  if variant == "c" and local_batch is not None and local_batch % model_axis:
    raise UserError(f"owt_variant 'c' sends each worker's {local_batch} rows in "
                    f"{model_axis} equal parts; use a global_batch_size that gives each device a "
                    f"multiple of {model_axis} examples.")


def pass_rows(variant: str, *, data: int, model: int, global_batch: int) -> np.ndarray:
  """Global batch positions of each pass's rows, `[K, rows]`, in the order the passes hold them.

  Device (d, m) of an owt mesh holds rows [(d·M + m)·b, (d·M + m + 1)·b) of the global batch
  (the conv stage's batch is split over both axes, data-major). Pass k takes, in every data group
  d, worker k's rows (b) or the k-th b/M of every worker's rows, worker by worker (c); data
  groups follow each other.
  """
  b = global_batch // (data * model)
  worker_rows = np.arange(global_batch).reshape(data, model, b)
  if variant == "b":
    return np.stack([worker_rows[:, k].reshape(-1) for k in range(model)])
  chunk = b // model
  return np.stack([worker_rows[:, :, k * chunk:(k + 1) * chunk].reshape(-1)
                   for k in range(model)])


@dataclasses.dataclass(frozen=True)
class Routing:
  """How pass k's rows reach the devices that run the FC stage.

  Attributes:
    passes: K.
    features: (this device's feature rows, k) → pass k's rows on this device (differentiable:
      its transpose sends the feature gradients back).
    gather_examples: this device's values without a gradient (labels, example ids) → those of
      every row any of its passes takes (once per step: they are small).
    take: (what `gather_examples` returned, k) → pass k's, in the order of its rows.
    sum_over_batch: sums a gradient over the devices that hold other rows of the same pass
      (the FC stage's batch axes; nothing on one device).
  """
  passes: int
  features: Callable[[jax.Array, int], jax.Array]
  gather_examples: Callable[[jax.Array], jax.Array]
  take: Callable[[jax.Array, int], jax.Array]
  sum_over_batch: Callable


def _worker_rows_everywhere(x, k: int, model: int):
  """Worker k's rows on every model device: k sends them to each of the others."""
  rows = jnp.where(jax.lax.axis_index(MODEL) == k, x, jnp.zeros_like(x))
  for j in range(model):
    if j != k:  # devices other than j receive zeros from this transfer.
      rows = rows + jax.lax.ppermute(x, MODEL, [(k, j)])
  return rows


def collective_routing(variant: str, model: int, fc_batch_axes: tuple[str, ...]) -> Routing:
  """The routing of `variant` inside the explicit step's shard_map (module docstring)."""

  def gather_examples(x):
    return layers.replicate_over_model(x, axis=0)  # [M·b], worker-major, model-invariant.

  def take(everyone, k):
    if variant == "b":
      return everyone.reshape(model, -1)[k]
    return everyone.reshape(model, model, -1)[:, k].reshape(-1)

  def features(x_bF, k):
    if variant == "b":
      return _worker_rows_everywhere(x_bF, k, model)
    return layers.gather_over_model(x_bF.reshape(model, -1, x_bF.shape[-1])[k], axis=0)

  def sum_over_batch(tree):
    return jax.lax.psum(tree, fc_batch_axes) if fc_batch_axes else tree

  return Routing(model, features, gather_examples, take, sum_over_batch)


def indexed_routing(rows: np.ndarray) -> Routing:
  """The routing of the single-device reference: pass k takes the rows `rows[k]`."""
  take = lambda x, k: x[rows[k]]
  return Routing(len(rows), take, lambda x: x, take, lambda tree: tree)


@dataclasses.dataclass(frozen=True)
class FcUpdate:
  """An FC update after every pass: the FC group's transformation, its parameters (unmarked)
  and its optimiser state as the step starts."""
  tx: object  # optax.GradientTransformation of the FC group (optim.GroupedOptimizer.groups).
  params: dict
  opt_state: object


@dataclasses.dataclass
class PassesOut:
  """What the conv stage and the K FC passes of one step produced."""
  grads: dict  # conv gradients, and (one update per step) the summed FC gradients.
  batch_stats: dict
  loss: jax.Array  # the sum over the batch of the per-example losses ÷ the global batch.
  correct: jax.Array
  fc_params: dict | None = None  # FC update per pass: the FC parameters after the last pass,
  fc_opt_state: object = None  # its optimiser state,
  fc_finite: jax.Array | None = None  # and whether every pass's FC gradient was finite.


def fc_passes(model: models.Network, params, batch: DeviceBatch, *, batch_stats, key,
              global_batch: int, routing: Routing, vary=lambda tree: tree,
              fc_update: FcUpdate | None = None) -> PassesOut:
  """The conv stage forward and backward around K FC passes (module docstring).

  Args:
    model, params: the network with this device's layout and its parameters as the step
      differentiates them (inside the explicit step: marked varying over their gradient axes).
    batch: this device's conv-stage batch.
    batch_stats: the model's batch-norm statistics.
    key: the step's dropout key.
    global_batch: the loss is summed over examples and divided by it.
    routing: how each pass's rows are taken.
    vary: marks FC parameters for differentiation the way `params` are marked (the FC update
      per pass differentiates the updated, unmarked FC parameters).
    fc_update: None sums the FC gradients of the passes; an `FcUpdate` updates them after
      every pass.
  """
  groups = optim.split_groups(params)

  def conv_stage(conv_params):
    variables = {"params": conv_params, "batch_stats": batch_stats}
    features, updated = model.apply(variables, batch.images_BHWC,
                                    example_ids_B=batch.example_ids_B, dropout_key=key,
                                    stage="features", mutable=["batch_stats"])
    return features, updated.get("batch_stats", {})

  all_labels = routing.gather_examples(batch.labels_B)
  all_ids = routing.gather_examples(batch.example_ids_B)

  def pass_loss(fc_params, rows, k):
    labels, ids = routing.take(all_labels, k), routing.take(all_ids, k)
    logits = model.apply({"params": fc_params}, rows, example_ids_B=ids, dropout_key=key,
                         stage="classifier")
    return common.summed_loss(logits, labels, normaliser=global_batch)

  features, conv_vjp, new_batch_stats = jax.vjp(conv_stage, groups["conv"], has_aux=True)
  feature_grads = jnp.zeros_like(features)
  loss, correct, fc_grads, fc_finite = 0.0, 0, None, jnp.array(True)
  for k in range(routing.passes):
    rows, route_vjp = jax.vjp(lambda f, k=k: routing.features(f, k), features)
    current = groups["fc"] if fc_update is None else vary(fc_update.params)
    (loss_k, correct_k), (grads_k, rows_grad) = jax.value_and_grad(
        pass_loss, argnums=(0, 1), has_aux=True)(current, rows, k)
    feature_grads = feature_grads + route_vjp(rows_grad)[0]
    loss, correct = loss + loss_k, correct + correct_k
    if fc_update is None:
      fc_grads = grads_k if fc_grads is None else jax.tree.map(jnp.add, fc_grads, grads_k)
    else:
      fc_update, finite_k = _after_pass(fc_update, grads_k, routing=routing)
      fc_finite = fc_finite & finite_k
  (conv_grads,) = conv_vjp(feature_grads.astype(features.dtype))
  if fc_update is None:
    return PassesOut(optim.merge_groups({"conv": conv_grads, "fc": fc_grads}), new_batch_stats,
                     loss, correct)
  return PassesOut(conv_grads, new_batch_stats, loss, correct, fc_update.params,
                   fc_update.opt_state, fc_finite)


def _after_pass(fc_update: FcUpdate, grads_k, *, routing: Routing) -> tuple[FcUpdate, jax.Array]:
  """The FC group updated by one pass's gradient, and whether that gradient was finite."""
  # The gradient of the pass's mean loss: the loss is normalised by the global batch, of which
  # the pass holds a K-th.
  grads_k = jax.tree.map(lambda g: g * routing.passes, routing.sum_over_batch(grads_k))
  updates, opt_state = fc_update.tx.update(grads_k, fc_update.opt_state, fc_update.params)
  return (dataclasses.replace(fc_update, params=optax.apply_updates(fc_update.params, updates),
                              opt_state=opt_state), common.all_finite(grads_k))


def apply_conv_gradients(state: TrainState, conv_grads, *, batch_stats, tx, fc_params,
                         fc_opt_state, finite: jax.Array, skip_nonfinite: bool) -> TrainState:
  """The step's end when the FC layers were updated pass by pass: the conv group's update by
  `conv_grads` (`tx` a GroupedOptimizer), the FC group as the passes left it, one step counted.
  With `skip_nonfinite`, a step that was not all `finite` leaves the state as it was."""
  conv_params = optim.split_groups(state.params)["conv"]
  updates, conv_state = tx.groups["conv"].update(conv_grads, state.opt_state["conv"],
                                                 conv_params)
  new_state = state.replace(
      step=state.step + 1,
      params=optim.merge_groups({"conv": optax.apply_updates(conv_params, updates),
                                 "fc": fc_params}),
      opt_state={"conv": conv_state, "fc": fc_opt_state}, batch_stats=batch_stats)
  if skip_nonfinite:
    new_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), new_state,
                             state.replace(step=state.step + 1))
  return new_state


def make_train_step(model: models.Network, plan: partitioning.Plan, mesh, *, tx,
                    specs: TrainState, options: StepOptions):
  """Returns owt's `train_step(state, images, labels) -> (state, metrics)` with the FC stage run
  as `options.owt_variant` ("b" or "c"): the explicit step's two regions (steps/explicit.py)
  around `fc_passes`.

  With `options.fc_updates_per_step` = K (`tx` the `optim.GroupedOptimizer` made with the same
  K) the FC layers are updated in region 1, each pass's FC gradient summed over "data" with
  psum, and only the conv gradients go on to region 2.
  """
  routing = collective_routing(options.owt_variant, plan.model, plan.fc_batch_axes)
  per_pass = options.fc_updates_per_step > 1

  def vary(tree):  # the FC parameters as region 1 differentiates them.
    return (jax.tree.map(lambda p: jax.lax.pcast(p, plan.fc_batch_axes, to="varying"), tree)
            if plan.fc_batch_axes else tree)

  def per_device_gradients(state: TrainState, images_BHWC, labels_B):
    batch, global_batch = explicit.device_batch(plan, images_BHWC, labels_B)
    fc_update = (FcUpdate(tx.groups["fc"], optim.split_groups(state.params)["fc"],
                          state.opt_state["fc"]) if per_pass else None)
    out = fc_passes(model, explicit.vary_over_grad_axes(state.params, plan), batch,
                    batch_stats=state.batch_stats, key=common.dropout_key(state),
                    global_batch=global_batch, routing=routing, vary=vary, fc_update=fc_update)
    carried = (explicit.stack_partial_grads(out.grads, plan), out.batch_stats)
    if per_pass:
      # Each pass's FC gradient was summed over the FC batch axes, so the flag varies over
      # "model" only; the verdict is agreed over the whole mesh.
      carried += (out.fc_params, out.fc_opt_state,
                  collectives.all_agree(out.fc_finite, mesh.axis_names))
    return carried, common.step_metrics(loss=explicit.sum_over_fc_batch(plan, out.loss),
                                        correct=explicit.sum_over_fc_batch(plan, out.correct),
                                        examples=global_batch)

  def per_device_update(state: TrainState, carried):
    partial_grads, batch_stats, *fc = carried
    grads = explicit.sum_partial_grads(partial_grads, plan, options.grad_reduce)
    finite = explicit.agreed_finite(grads, mesh)
    if not per_pass:
      new_state = common.apply_gradients(state, grads, batch_stats=batch_stats, tx=tx,
                                         finite=finite,
                                         skip_nonfinite=options.skip_nonfinite_steps)
    else:  # the FC layers were updated pass by pass in region 1.
      fc_params, fc_opt_state, fc_finite = fc
      finite = finite & fc_finite
      new_state = apply_conv_gradients(state, grads, batch_stats=batch_stats, tx=tx,
                                       fc_params=fc_params, fc_opt_state=fc_opt_state,
                                       finite=finite,
                                       skip_nonfinite=options.skip_nonfinite_steps)
    return new_state, 1.0 - finite.astype(jnp.float32)

  grad_specs = partitioning.partial_grad_specs(specs.params, plan)
  carried_specs = (grad_specs, specs.batch_stats)
  if per_pass:  # only the conv gradients leave region 1, with the FC group's new state.
    carried_specs = (optim.split_groups(grad_specs)["conv"], specs.batch_stats,
                     optim.split_groups(specs.params)["fc"], specs.opt_state["fc"], P())
  return explicit.two_region_step(per_device_gradients, per_device_update, mesh=mesh,
                                  specs=specs, batch_spec=plan.batch_spec,
                                  carried_specs=carried_specs, tuned=options.tune_xla_cpu)


def make_reference_step(model: models.Network, tx, *, rows: np.ndarray,
                        fc_updates_per_step: int = 1):
  """The variable-batch step on one device, independent of any mesh: `step(state, images,
  labels) -> (state, metrics)`, jitted.

  `model` is the whole network (`Layout()`); `rows` the passes' rows (`pass_rows`); with
  `fc_updates_per_step` = K > 1, `tx` is the `optim.GroupedOptimizer` made with the same K.
  """
  if len(rows) != fc_updates_per_step and fc_updates_per_step != 1:
    raise ValueError("fc_updates_per_step must be 1 or the number of passes.")
  routing = indexed_routing(rows)

  def step(state: TrainState, images_BHWC, labels_B):
    global_batch = images_BHWC.shape[0]
    fc_update = None
    if fc_updates_per_step > 1:
      fc_update = FcUpdate(tx.groups["fc"], optim.split_groups(state.params)["fc"],
                           state.opt_state["fc"])
    out = fc_passes(model, state.params, DeviceBatch(images_BHWC, labels_B,
                                                     jnp.arange(global_batch)),
                    batch_stats=state.batch_stats, key=common.dropout_key(state),
                    global_batch=global_batch, routing=routing, fc_update=fc_update)
    if fc_update is None:
      new_state = common.apply_gradients(state, out.grads, batch_stats=out.batch_stats, tx=tx,
                                         finite=jnp.array(True), skip_nonfinite=False)
    else:
      new_state = apply_conv_gradients(state, out.grads, batch_stats=out.batch_stats, tx=tx,
                                       fc_params=out.fc_params, fc_opt_state=out.fc_opt_state,
                                       finite=jnp.array(True), skip_nonfinite=False)
    return new_state, common.step_metrics(loss=out.loss, correct=out.correct,
                                          examples=global_batch)

  return jax.jit(step, donate_argnums=0)

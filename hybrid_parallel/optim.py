"""Optimisers and learning-rate rules, all optax.

SGD (`optimizer = "sgd"`). The update of Krizhevsky et al. 2012 — v ← 0.9·v − 0.0005·ε·w − ε·∇L,
w ← w + v — is `add_decayed_weights(wd)` followed by `optax.sgd(ε, momentum=0.9)`. Weight decay is
L2 added to the gradient, on the weights only (kernels; not biases or batch-norm parameters).

LARS (`optimizer = "lars"`, You, Gitman & Ginsburg 2017): the decayed gradient u = ∇L + β·w of each
layer is scaled by the trust ratio η·‖w‖/‖u‖ before momentum, biases and batch-norm parameters
keeping the plain update (neither decay nor trust ratio). Under model parallelism a layer's norms
are summed over the devices that hold its shards (`norm_axes`), so the ratio is the whole layer's.

Momentum correction (Goyal et al. 2017, §2.1): when the learning rate changes, a momentum buffer
that already holds LR-scaled updates must be rescaled by ε_new/ε_old. optax's `sgd` applies the
LR *after* the momentum trace, so its buffer holds no LR and needs no correction. `optax.lars`
applies the LR *before* the trace (the buffer holds ε-scaled steps, uncorrected); our LARS applies
it after, which is exactly the corrected rule (tests/optim_test.py shows both facts).

Learning rate at step t (`peak_learning_rate`, `learning_rate_schedule`):
  peak = base_lr × scale, scale = 1, k or √k with k = global_batch / reference_batch
         (`scaling` = none / linear / sqrt; Krizhevsky 2014, Goyal et al. 2017);
  warmup over `warmup_epochs`: "gradual" — linear from base_lr to peak (Goyal et al.), or
         "constant" — base_lr, then peak (the variant Goyal et al. found to spike the error);
  then `decay` = "step" (× decay_factor at each of decay_epochs), "cosine" or "constant".
Per-group multipliers (`lr_multipliers` {"conv": ..., "fc": ...}) scale the rate of the conv
layers (with their batch norms) and of the FC layers: Krizhevsky 2014's hybrid uses conv × K,
FC × 1.
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from hybrid_parallel import checks, partitioning
from hybrid_parallel.errors import UserError

LR_SCALINGS = ("none", "linear", "sqrt")
LR_DECAYS = ("step", "cosine", "constant")
WARMUPS = ("gradual", "constant")
OPTIMIZERS = ("sgd", "lars")
GROUPS = ("conv", "fc")  # partitioning.layer_group
# (path, leaf) -> mesh axes over which the leaf's shards make up the whole parameter.
NormAxes = Callable[[tuple, jax.Array], tuple[str, ...]]


def peak_learning_rate(base_lr: float, global_batch: int, *, reference_batch: int,
                       scaling: str) -> float:
  """base_lr scaled for `global_batch` by the `scaling` rule."""
  checks.one_of(LR_SCALINGS)("lr_scaling", scaling)
  k = global_batch / reference_batch
  return base_lr * {"none": 1.0, "linear": k, "sqrt": math.sqrt(k)}[scaling]


def learning_rate_schedule(base_lr: float, peak_lr: float, *, steps_per_epoch: int,
                           total_steps: int, warmup_epochs: float = 0.0,
                           warmup: str = "gradual", decay: str = "step",
                           decay_factor: float = 0.1,
                           decay_epochs: tuple[float, ...] = ()) -> optax.Schedule:
  """The learning rate per step (see the module docstring): warmup from `base_lr` to `peak_lr`
  over `warmup_epochs`, then `decay`."""
  warmup_steps = round(warmup_epochs * steps_per_epoch)
  checks.one_of(LR_DECAYS)("lr_decay", decay)
  checks.one_of(WARMUPS)("warmup", warmup)
  if decay == "step":
    boundaries = {round(e * steps_per_epoch) - warmup_steps: decay_factor for e in decay_epochs}
    after_warmup = optax.piecewise_constant_schedule(
        peak_lr, {b: f for b, f in boundaries.items() if b > 0})
  elif decay == "cosine":
    after_warmup = optax.cosine_decay_schedule(peak_lr, max(1, total_steps - warmup_steps))
  else:
    after_warmup = optax.constant_schedule(peak_lr)
  if warmup_steps <= 0:
    return after_warmup
  if warmup == "gradual":
    ramp = optax.linear_schedule(base_lr, peak_lr, warmup_steps)
  else:
    ramp = optax.constant_schedule(base_lr)
  return optax.join_schedules([ramp, after_warmup], [warmup_steps])


def _is_kernel(params):
  # Decay and trust ratio on weights only: biases and batch-norm scales / shifts are 1-D (as
  # cuda-convnet's configs set wcBias = 0; Goyal et al. and You et al. exclude BN parameters).
  return jax.tree.map(lambda p: p.ndim > 1, params)


def check_multipliers(name: str, multipliers) -> None:
  """One UserError unless `multipliers` maps groups of `GROUPS` to factors > 0."""
  try:
    multipliers = dict(multipliers)  # a mapping, or a config's group of fields.
  except (TypeError, ValueError):
    raise UserError(f"{name} must map groups ({' and '.join(GROUPS)}) to factors, got "
                    f"{multipliers!r}.") from None
  for group, factor in multipliers.items():
    if group not in GROUPS:
      raise UserError(f"unknown {name} group {group!r}; the groups are {' and '.join(GROUPS)}.")
    checks.number(low=0, low_open=True)(f"{name}.{group}", factor)


def scale_by_group(multipliers: dict[str, float]) -> optax.GradientTransformation:
  """Multiplies each parameter's update by its group's factor (`partitioning.layer_group`).

  Placed after the learning rate, it is a per-group learning-rate multiplier.
  """
  check_multipliers("lr_multipliers", multipliers)

  def update_fn(updates, state, params=None):
    del params
    return jax.tree.map_with_path(
        lambda path, u: u * multipliers[partitioning.layer_group(path)], updates), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)


def scale_by_layer_trust_ratio(trust_coefficient: float, *, eps: float = 0.0,
                               norm_axes: NormAxes | None = None) -> optax.GradientTransformation:
  """LARS's trust ratio η·‖w‖/(‖u‖ + eps) per layer, with norms over all the layer's shards.

  Equals `optax.scale_by_trust_ratio` (also 1 where either norm is 0) on whole parameters; inside
  a shard_map, `norm_axes(path, leaf)` names the mesh axes to sum the squared norms over.
  """

  def update_fn(updates, state, params):
    def scale(path, u, w):
      axes = norm_axes(path, w) if norm_axes else ()
      sums = (jnp.sum(jnp.square(w)), jnp.sum(jnp.square(u)))
      if axes:
        sums = jax.lax.psum(sums, axes)
      w_norm, u_norm = jnp.sqrt(sums[0]), jnp.sqrt(sums[1])
      ratio = trust_coefficient * w_norm / (u_norm + eps)
      return u * jnp.where((w_norm == 0) | (u_norm == 0), 1.0, ratio).astype(u.dtype)

    return jax.tree.map_with_path(scale, updates, params), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)


class GroupedOptimizer(NamedTuple):
  """One optimiser per layer group, each with its own state, so that a step can update the FC
  layers more often than the conv layers (Krizhevsky 2014's variable batch size, made by
  `make_optimizer(fc_updates_per_step=K)`).

  `init` and `update` act on the whole parameter tree, like any optax transformation (the state
  is `{"conv": ..., "fc": ...}`); `groups[g]` is group g's own transformation, which a step
  applies to that group's sub-tree (`split_groups`) on its own.
  """
  init: Callable
  update: Callable
  groups: dict[str, optax.GradientTransformation]


def split_groups(tree: dict) -> dict[str, dict]:
  """{"conv": ..., "fc": ...}: the layers of a parameter-shaped tree (keyed by layer name) by
  group (`partitioning.layer_group`)."""
  groups = {group: {} for group in GROUPS}
  for layer, value in tree.items():
    groups[partitioning.layer_group((layer,))][layer] = value
  return groups


def merge_groups(groups: dict[str, dict]) -> dict:
  """The inverse of `split_groups`."""
  return {layer: value for group in groups.values() for layer, value in group.items()}


def _parts(schedule, *, optimizer, momentum, nesterov, weight_decay, lars_trust_coefficient,
           lars_eps, norm_axes) -> list[optax.GradientTransformation]:
  """Decay, [LARS's trust ratio], momentum and the learning rate, in that order."""
  decay = optax.add_decayed_weights(weight_decay, mask=_is_kernel)
  if optimizer == "sgd":
    parts = [decay, optax.sgd(schedule, momentum=momentum or None, nesterov=nesterov)]
  else:
    parts = [decay,
             optax.masked(scale_by_layer_trust_ratio(lars_trust_coefficient, eps=lars_eps,
                                                     norm_axes=norm_axes), _is_kernel),
             optax.trace(decay=momentum, nesterov=nesterov),
             optax.scale_by_learning_rate(schedule)]
  return parts


def make_optimizer(schedule: optax.Schedule, *, optimizer: str = "sgd", momentum: float = 0.9,
                   nesterov: bool = False, weight_decay: float = 5e-4,
                   lars_trust_coefficient: float = 0.001, lars_eps: float = 0.0,
                   lr_multipliers: dict[str, float] | None = None,
                   norm_axes: NormAxes | None = None,
                   fc_updates_per_step: int = 1) -> optax.GradientTransformation:
  """SGD or LARS at the scheduled learning rate (see the module docstring).

  Args:
    schedule: learning rate per step.
    optimizer: "sgd" or "lars".
    momentum, nesterov: the momentum trace (0: plain SGD).
    weight_decay: L2 coefficient, on the kernels only.
    lars_trust_coefficient, lars_eps: LARS's η and the ε added to the update's norm.
    lr_multipliers: per-group factors {"conv": ..., "fc": ...}; None or all 1: none.
    norm_axes: for LARS inside a shard_map: the mesh axes each parameter is split over
      (`partitioning.sharded_axes`); None for whole parameters.
    fc_updates_per_step: K > 1 makes a `GroupedOptimizer` whose FC transformation is applied K
      times per step, at the step's learning rate each time (its schedule is read at its update
      count ÷ K); 1 is one transformation of the whole tree.
  """
  checks.one_of(OPTIMIZERS)("optimizer", optimizer)
  multipliers = dict(lr_multipliers or {})
  check_multipliers("lr_multipliers", multipliers)
  settings = dict(optimizer=optimizer, momentum=momentum, nesterov=nesterov,
                  weight_decay=weight_decay, lars_trust_coefficient=lars_trust_coefficient,
                  lars_eps=lars_eps, norm_axes=norm_axes)
  if fc_updates_per_step > 1:
    schedules = {"conv": schedule,
                 "fc": lambda count: schedule(count // fc_updates_per_step)}
    groups = {group: optax.chain(*_parts(schedules[group], **settings),
                                 optax.scale(multipliers.get(group, 1.0)))
              for group in GROUPS}

    def init(params):
      return {g: groups[g].init(tree) for g, tree in split_groups(params).items()}

    def update(updates, state, params=None):
      split_updates, split_params = split_groups(updates), split_groups(params)
      new = {g: groups[g].update(split_updates[g], state[g], split_params[g]) for g in GROUPS}
      return merge_groups({g: u for g, (u, _) in new.items()}), {g: s for g, (_, s) in
                                                                  new.items()}

    return GroupedOptimizer(init, update, groups)
  parts = _parts(schedule, **settings)
  if any(m != 1.0 for m in multipliers.values()):
    parts.append(scale_by_group(multipliers))
  return optax.chain(*parts)

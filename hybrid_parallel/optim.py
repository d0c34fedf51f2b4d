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

Learning rate at step t (`learning_rate_schedule`):
  peak = base_lr × scale, scale = 1, k or √k with k = global_batch / reference_batch
         (`lr_scaling` = none / linear / sqrt; Krizhevsky 2014, Goyal et al. 2017);
  warmup over `warmup_epochs`: "gradual" — linear from base_lr to peak (Goyal et al.), or
         "constant" — base_lr, then peak (the variant Goyal et al. found to spike the error);
  then `lr_decay` = "step" (× lr_decay_factor at each of lr_decay_epochs), "cosine" or "constant".
Per-group multipliers (`lr_multipliers.conv`, `.fc`) scale the rate of the conv layers (with
their batch norms) and of the FC layers: Krizhevsky 2014's hybrid uses conv × K, FC × 1.
"""

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from hybrid_parallel import partitioning
from hybrid_parallel.errors import UserError

LR_SCALINGS = ("none", "linear", "sqrt")
LR_DECAYS = ("step", "cosine", "constant")
WARMUPS = ("gradual", "constant")
OPTIMIZERS = ("sgd", "lars")
# (path, leaf) -> mesh axes over which the leaf's shards make up the whole parameter.
NormAxes = Callable[[tuple, jax.Array], tuple[str, ...]]


def _choose(what: str, value: str, choices: tuple[str, ...]) -> str:
  if value not in choices:
    raise UserError(f"unknown {what} {value!r}; choose one of {', '.join(choices)}.")
  return value


def peak_learning_rate(base_lr: float, global_batch: int, reference_batch: int,
                       scaling: str) -> float:
  """base_lr scaled for `global_batch` by the `scaling` rule."""
  _choose("lr_scaling", scaling, LR_SCALINGS)
  k = global_batch / reference_batch
  return base_lr * {"none": 1.0, "linear": k, "sqrt": math.sqrt(k)}[scaling]


def learning_rate_schedule(config, global_batch: int, steps_per_epoch: int,
                           total_steps: int) -> optax.Schedule:
  """The schedule the config asks for, in steps (see the module docstring)."""
  peak = peak_learning_rate(config.base_learning_rate, global_batch,
                            config.reference_batch_size, config.lr_scaling)
  warmup_steps = round(config.warmup_epochs * steps_per_epoch)
  _choose("lr_decay", config.lr_decay, LR_DECAYS)
  _choose("warmup", config.warmup, WARMUPS)
  if config.lr_decay == "step":
    boundaries = {round(e * steps_per_epoch) - warmup_steps: config.lr_decay_factor
                  for e in config.lr_decay_epochs}
    decay = optax.piecewise_constant_schedule(peak, {b: f for b, f in boundaries.items() if b > 0})
  elif config.lr_decay == "cosine":
    decay = optax.cosine_decay_schedule(peak, max(1, total_steps - warmup_steps))
  else:
    decay = optax.constant_schedule(peak)
  if warmup_steps <= 0:
    return decay
  if config.warmup == "gradual":
    warmup = optax.linear_schedule(config.base_learning_rate, peak, warmup_steps)
  else:
    warmup = optax.constant_schedule(config.base_learning_rate)
  return optax.join_schedules([warmup, decay], [warmup_steps])


def _is_kernel(params):
  # Decay and trust ratio on weights only: biases and batch-norm scales / shifts are 1-D (as
  # cuda-convnet's configs set wcBias = 0; Goyal et al. and You et al. exclude BN parameters).
  return jax.tree.map(lambda p: p.ndim > 1, params)


def scale_by_group(multipliers: dict[str, float]) -> optax.GradientTransformation:
  """Multiplies each parameter's update by its group's factor (`partitioning.layer_group`).

  Placed after the learning rate, it is a per-group learning-rate multiplier.
  """
  for group in multipliers:
    if group not in ("conv", "fc"):
      raise UserError(f"unknown lr_multipliers group {group!r}; the groups are conv and fc.")

  def update_fn(updates, state, params=None):
    del params
    return jax.tree_util.tree_map_with_path(
        lambda path, u: u * multipliers[partitioning.layer_group(path)], updates), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)


def scale_by_layer_trust_ratio(trust_coefficient: float, eps: float = 0.0,
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

    return jax.tree_util.tree_map_with_path(scale, updates, params), state

  return optax.GradientTransformation(lambda _: optax.EmptyState(), update_fn)


def make_optimizer(config, schedule: optax.Schedule,
                   norm_axes: NormAxes | None = None) -> optax.GradientTransformation:
  """`config.optimizer` at the scheduled learning rate (see the module docstring).

  Args:
    config: the run's config (optimizer, momentum, nesterov, weight_decay, lars_*,
      lr_multipliers).
    schedule: learning rate per step.
    norm_axes: for LARS inside a shard_map: the mesh axes each parameter is split over
      (`partitioning.sharded_axes`); None for whole parameters.
  """
  optimizer = _choose("optimizer", config.optimizer, OPTIMIZERS)
  decay = optax.add_decayed_weights(config.weight_decay, mask=_is_kernel)
  if optimizer == "sgd":
    parts = [decay, optax.sgd(schedule, momentum=config.momentum or None,
                              nesterov=config.nesterov)]
  else:
    parts = [decay,
             optax.masked(scale_by_layer_trust_ratio(config.lars_trust_coefficient,
                                                     config.lars_eps, norm_axes), _is_kernel),
             optax.trace(decay=config.momentum, nesterov=config.nesterov),
             optax.scale_by_learning_rate(schedule)]
  multipliers = dict(config.lr_multipliers)
  if any(m != 1.0 for m in multipliers.values()):
    parts.append(scale_by_group(multipliers))
  return optax.chain(*parts)

"""Optimisers and learning-rate rules, all optax.

The update of Krizhevsky et al. 2012 — v ← 0.9·v − 0.0005·ε·w − ε·∇L, w ← w + v — is
`add_decayed_weights(wd)` followed by `optax.sgd(ε, momentum=0.9)`: optax applies momentum to the
raw (decayed) gradient and the learning rate afterwards, so a changing LR needs no momentum
correction (Goyal et al. 2017, §2.1).

Learning rate at step t (`learning_rate_schedule`):
  peak = base_lr × scale, scale = 1, k or √k with k = global_batch / reference_batch
         (`lr_scaling` = none / linear / sqrt; Krizhevsky 2014, Goyal et al. 2017);
  warmup: linear from base_lr to peak over `warmup_epochs` (Goyal et al.'s gradual warmup);
  then `lr_decay` = "step" (× lr_decay_factor at each of lr_decay_epochs), "cosine" or "constant".
"""

import math

import jax
import optax

from hybrid_parallel.errors import UserError

LR_SCALINGS = ("none", "linear", "sqrt")
LR_DECAYS = ("step", "cosine", "constant")


def peak_learning_rate(base_lr: float, global_batch: int, reference_batch: int,
                       scaling: str) -> float:
  """base_lr scaled for `global_batch` by the `scaling` rule."""
  if scaling not in LR_SCALINGS:
    raise UserError(f"unknown lr_scaling {scaling!r}; choose one of {', '.join(LR_SCALINGS)}.")
  k = global_batch / reference_batch
  return base_lr * {"none": 1.0, "linear": k, "sqrt": math.sqrt(k)}[scaling]


def learning_rate_schedule(config, global_batch: int, steps_per_epoch: int,
                           total_steps: int) -> optax.Schedule:
  """The schedule the config asks for, in steps (see the module docstring)."""
  peak = peak_learning_rate(config.base_learning_rate, global_batch,
                            config.reference_batch_size, config.lr_scaling)
  warmup_steps = round(config.warmup_epochs * steps_per_epoch)
  if config.lr_decay == "step":
    boundaries = {round(e * steps_per_epoch) - warmup_steps: config.lr_decay_factor
                  for e in config.lr_decay_epochs}
    decay = optax.piecewise_constant_schedule(peak, {b: f for b, f in boundaries.items() if b > 0})
  elif config.lr_decay == "cosine":
    decay = optax.cosine_decay_schedule(peak, max(1, total_steps - warmup_steps))
  elif config.lr_decay == "constant":
    decay = optax.constant_schedule(peak)
  else:
    raise UserError(f"unknown lr_decay {config.lr_decay!r}; choose one of {', '.join(LR_DECAYS)}.")
  if warmup_steps <= 0:
    return decay
  warmup = optax.linear_schedule(config.base_learning_rate, peak, warmup_steps)
  return optax.join_schedules([warmup, decay], [warmup_steps])


def _is_kernel(params):
  # Weight decay on weights only; biases keep theirs (as cuda-convnet's configs set wcBias = 0).
  return jax.tree.map(lambda p: p.ndim > 1, params)


def make_optimizer(config, schedule: optax.Schedule) -> optax.GradientTransformation:
  """SGD with momentum and L2 weight decay on the kernels, at the scheduled learning rate."""
  return optax.chain(
      optax.add_decayed_weights(config.weight_decay, mask=_is_kernel),
      optax.sgd(schedule, momentum=config.momentum or None, nesterov=config.nesterov))

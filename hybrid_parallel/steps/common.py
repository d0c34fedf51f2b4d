"""What every step shares: the synchronous steps' options and which settings each backend can
run, dropout keys and example ids, the one loss and its gradient, the step's metrics, and the
optimiser update."""

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp
import optax

from hybrid_parallel import checks, collectives, layers, models, partitioning
from hybrid_parallel.errors import UserError
from hybrid_parallel.train_state import TrainState


# explicit: jax.shard_map, every collective written out (steps/explicit.py; the reference);
# gspmd: the same PartitionSpecs handed to jax.jit, XLA placing the collectives (steps/gspmd.py);
# pmap: the data scheme as the Flax examples write it (steps/pmap.py).
BACKENDS = ("explicit", "gspmd", "pmap")
# How owt runs its FC layers: "a", the model's gather; "b" and "c", K passes (variable_batch.py).
OWT_VARIANTS = ("a", "b", "c")


@dataclasses.dataclass(frozen=True)
class StepOptions:
  """How a synchronous step is built: every option of the steps, listed here only. Each field is
  the config field of its name, declared with its check (configs/default.py says what each does).

  Attributes:
    backend: how the step is partitioned (`BACKENDS`).
    grad_reduce: the all-reduce algorithm of the gradient sums (collectives.ALGORITHMS; the
      explicit backend).
    microbatches: passes over slices of each device's batch, accumulated into one update.
    skip_nonfinite_steps: a step with a non-finite gradient leaves the state as it was.
    tune_xla_cpu: compile with compiler_options' CPU step options (on a CPU mesh).
    owt_variant: how owt runs its FC layers (`OWT_VARIANTS`).
    fc_updates_per_step: 1, or K (the model axis) for an FC update after every pass of "b" or
      "c" (Krizhevsky's variable batch size).
  """
  backend: str = checks.setting(checks.one_of(BACKENDS))
  grad_reduce: str = checks.setting(checks.one_of(collectives.ALGORITHMS))
  microbatches: int = checks.setting(checks.integer(1))
  skip_nonfinite_steps: bool = checks.setting(checks.boolean)
  tune_xla_cpu: bool = checks.setting(checks.boolean)
  owt_variant: str = checks.setting(checks.one_of(OWT_VARIANTS))
  fc_updates_per_step: int = checks.setting(checks.integer(1))


# The schemes each backend runs: the explicit step every one; GSPMD the synchronous ones; pmap,
# the Flax examples' step, those that split the batch only.
_SCHEMES = {"explicit": tuple(partitioning.SCHEMES), "gspmd": partitioning.SYNCHRONOUS,
            "pmap": tuple(name for name, rule in partitioning.SCHEMES.items()
                          if rule.mesh in ("1×1", "D×1") and not rule.local_sgd)}
_GRADIENT_SUM = {"gspmd": "lets XLA place the gradient sum",
                 "pmap": "sums gradients with lax.pmean"}


def check_backend(options: StepOptions, *, scheme: str, per_worker_batch_norm: bool = False,
                  processes: int = 1) -> None:
  """One UserError for a setting `options.backend` (one of `BACKENDS`) cannot run; the explicit
  backend runs them all."""
  backend = options.backend
  if backend == "explicit":
    return
  if scheme not in _SCHEMES[backend]:
    raise UserError(f"backend {backend!r} runs the schemes {', '.join(_SCHEMES[backend])}; "
                    f"parallelism {scheme!r} needs the explicit backend.")
  if options.grad_reduce != "psum":
    raise UserError(f"backend {backend!r} {_GRADIENT_SUM[backend]}; grad_reduce "
                    f"{options.grad_reduce!r} needs the explicit backend.")
  if options.microbatches > 1:
    raise UserError(f"microbatches = {options.microbatches} needs the explicit backend, not "
                    f"{backend!r}.")
  if backend == "gspmd" and per_worker_batch_norm:
    raise UserError("backend 'gspmd' normalises batch-norm layers over the whole batch; set "
                    "sync_batch_norm = True (per-worker statistics need the explicit backend).")
  if backend == "pmap" and processes > 1:
    raise UserError("backend 'pmap' runs in one process here; use the explicit backend with "
                    "several processes.")


@flax.struct.dataclass
class DeviceBatch:
  """One device's examples: images, labels and their global batch positions (which key the
  dropout masks)."""
  images_BHWC: jax.Array
  labels_B: jax.Array
  example_ids_B: jax.Array


def example_ids(plan: partitioning.Plan, local_batch: int) -> jax.Array:
  """Global batch positions of this device's examples (the batch is split in mesh order)."""
  ids = jnp.arange(local_batch, dtype=jnp.int32)
  if plan.conv_batch_axes:
    ids = ids + jax.lax.axis_index(plan.conv_batch_axes) * local_batch
  return ids


def to_fc_batch(plan: partitioning.Plan, x: jax.Array) -> jax.Array:
  """Per-example values of the conv-stage batch, gathered as the model gathers the features."""
  return layers.replicate_over_model(x, axis=0) if plan.layout.conv_batch_over_model else x


def dropout_key(state) -> jax.Array:
  """The dropout key of the step about to run: a function of (seed, step) only.

  `state` is any state with the run's root key data `rng` and the update count `step`.
  """
  return jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)


@dataclasses.dataclass
class Gradients:
  """One device's share of a step: its (partial) gradient and sums over its examples."""
  grads: dict
  batch_stats: dict
  loss: jax.Array  # the examples' cross-entropies summed and divided by the normaliser.
  correct: jax.Array  # how many of its examples the model got right.


def summed_loss(logits_BC, labels_B, *, normaliser: int) -> tuple[jax.Array, jax.Array]:
  """The one loss of every step kind: the examples' cross-entropies summed and divided by
  `normaliser`, and how many of them the model got right."""
  losses_B = optax.softmax_cross_entropy_with_integer_labels(logits_BC, labels_B)
  return losses_B.sum() / normaliser, jnp.sum(jnp.argmax(logits_BC, -1) == labels_B)


def loss_and_grads(model: models.Network, params, batch: DeviceBatch, *, batch_stats, key,
                   normaliser: int, labels_B=None) -> Gradients:
  """`summed_loss` of `batch` under `params`, with its gradient.

  `normaliser` is the global batch where the devices' gradients are summed (the explicit step),
  or the device's own batch where they are averaged (a whole-batch step, pmap, local SGD).
  `labels_B` are the labels the logits line up with, when not `batch.labels_B` (owt's FC stage
  gathers the examples as it gathers their features).
  """
  labels_B = batch.labels_B if labels_B is None else labels_B

  def loss_fn(params):
    logits_BC, updated = model.apply({"params": params, "batch_stats": batch_stats},
                                     batch.images_BHWC, example_ids_B=batch.example_ids_B,
                                     dropout_key=key, mutable=["batch_stats"])
    loss, correct = summed_loss(logits_BC, labels_B, normaliser=normaliser)
    return loss, (correct, updated.get("batch_stats", {}))

  (loss, (correct, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
  return Gradients(grads, batch_stats, loss, correct)


def step_metrics(*, loss, correct, examples: int, finite=None) -> dict:
  """The metrics every step reports: the mean loss and accuracy over the step's `examples`
  (`loss` and `correct` already combined over the devices), and, where the step checks them,
  whether its gradients were not all finite."""
  metrics = {"train_loss": loss, "train_accuracy": correct / examples}
  if finite is not None:
    metrics["nonfinite_grads"] = 1.0 - finite.astype(jnp.float32)
  return metrics


def all_finite(grads) -> jax.Array:
  """True when every gradient (of this device's shards) is finite."""
  return jnp.all(jnp.array([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))


def apply_gradients(state: TrainState, grads, *, batch_stats, tx, finite: jax.Array,
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

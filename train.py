"""train_and_evaluate(config, workdir): mesh → state → data → loop → metrics.

The loop is the same for every scheme; `config.parallelism` and `config.mesh` only change the plan
(hybrid_parallel.partitioning) that the mesh, the state's shardings and the step are built from.
"""

import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from jax.sharding import NamedSharding

import input_pipeline
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel import checkpointing, faults, metric_writers, models, optim, partitioning
from hybrid_parallel import profiling, schemes, step


def _total_steps(config, steps_per_epoch: int) -> int:
  if config.num_train_steps > 0:
    return config.num_train_steps
  return max(1, round(config.num_epochs * steps_per_epoch))


def evaluate(eval_step, variables, dataset, sharding, batch: int) -> dict[str, float]:
  """Mean loss, top-1 and top-5 accuracy over the whole test set."""
  sums = None
  for images, labels, weights in input_pipeline.eval_batches(dataset, sharding, batch):
    out = eval_step(variables, images, labels, weights)
    # Blocking on the previous sums bounds the steps in flight, as in the training loop.
    sums = out if sums is None else jax.tree.map(jnp.add, jax.block_until_ready(sums), out)
  sums = jax.device_get(sums)
  count = float(sums.pop("count"))
  return {k: float(v) / count for k, v in sums.items()}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
  """Trains `config` and writes metrics to `workdir`; returns the final eval metrics.

  Raises:
    UserError: for a config, mesh or dataset that cannot work, before any training.
  """
  plan = partitioning.plan(config.parallelism, config.mesh.data, config.mesh.model)
  partitioning.check_batch(plan, config.global_batch_size, microbatches=config.microbatches)
  partitioning.check_batch(plan, config.eval_batch_size, "eval_batch_size")
  devices, note = mesh_lib.pick_devices(plan.data * plan.model)
  if note:
    logging.warning(note)
  mesh = schemes.make_mesh(config, plan, devices)
  dataset = input_pipeline.load(config)

  global_batch = config.global_batch_size
  steps_per_epoch = input_pipeline.steps_per_epoch(dataset, global_batch)
  total_steps = _total_steps(config, steps_per_epoch)
  schedule = optim.learning_rate_schedule(config, global_batch, steps_per_epoch, total_steps)
  model, _, scheme = schemes.setup(config, plan, mesh, dataset.num_classes, dataset.channels,
                                   schedule, abstract=True)
  train_step = scheme.train_step
  eval_step = step.make_eval_step(model, plan, mesh, scheme.eval_specs, config.eval_crops,
                                  config.tune_xla_cpu)
  batch_sharding = NamedSharding(mesh, plan.batch_spec)
  logging.info("%s: %s on a %d×%d mesh of %s devices, global batch %d, %d steps (%d per epoch), "
               "%s parameters", config.model, config.parallelism, plan.data, plan.model,
               devices[0].platform, global_batch, total_steps, steps_per_epoch,
               f"{models.count_params(scheme.eval_variables(scheme.state)['params']):,}")

  checkpointer = checkpointing.Checkpointer(
      os.path.join(workdir, "checkpoints"), config.checkpoint_every_steps, config.checkpoint_keep,
      _run_description(config, plan))
  restored = checkpointer.restore_latest(scheme.state)
  if restored:
    state, first_step = restored.state, restored.step
    logging.info("resumed from the checkpoint at step %d (written by %s on a %s mesh); the data "
                 "continue from position %s.", first_step, restored.meta.get("parallelism"),
                 restored.meta.get("mesh"), restored.meta.get("data_position"))
  else:
    state, first_step = scheme.init(), 0
  batches = input_pipeline.train_iterator(
      dataset, batch_sharding, global_batch, config.seed, input_pipeline.start_position(
          dataset, first_step, global_batch, restored.meta.get("data_position") if restored
          else None))

  is_logger = jax.process_index() == 0
  writer = metric_writers.MetricWriter(workdir) if is_logger else None
  progress = metric_writers.Progress(total_steps, first_step)
  watchdog = faults.Watchdog(config.step_timeout_s, _peer_hint())
  profiler = profiling.StepProfiler(workdir, first_step, config.profile_steps)
  last_checkpoint = restored.step if restored else None
  window, window_start = [], time.perf_counter()  # (step, metrics) since the last log row.
  previous = None  # (step, metrics) of the step before the one in flight.
  eval_metrics = {}
  try:
    with jax.set_mesh(mesh), faults.Preemption() as preemption:
      for s in range(first_step, total_steps):
        images, labels, data_position = next(batches)
        profiler.before(s)
        state, metrics = train_step(state, images, labels)
        profiler.after(s, metrics)
        done = s + 1
        if previous:
          # At most two steps in flight. Deeper queues gain nothing and can starve XLA:CPU's thread
          # pool when simulated devices block in a collective's rendezvous (a 40 s abort).
          _check(*previous, config, last_checkpoint)
        previous = (done, metrics)
        window.append(previous)
        watchdog.beat()
        stopping = preemption.requested
        saving = checkpointer.due(done) or stopping or done == total_steps
        logging_row = done % config.log_every_steps == 0 or done == total_steps or stopping
        if saving or logging_row:
          _check(done, metrics, config, last_checkpoint)  # never save or log a non-finite step.
        if saving:
          checkpointer.save(done, state, input_pipeline.global_position(data_position))
          last_checkpoint = done
        if logging_row:
          _log_row(window, schedule, global_batch, time.perf_counter() - window_start, writer,
                   progress)
          window, window_start = [], time.perf_counter()
        if stopping:
          checkpointer.wait()
          logging.warning("SIGTERM: saved the checkpoint at step %d; exiting.", done)
          return eval_metrics
        if done % config.eval_every_steps == 0 or done == total_steps:
          eval_metrics = evaluate(eval_step, scheme.eval_variables(state), dataset,
                                  batch_sharding, config.eval_batch_size)
          if is_logger:
            writer.write(done, eval_metrics)
            logging.info("eval at step %d | loss %.4f | top-1 %.2f%% | top-5 %.2f%%", done,
                         eval_metrics["eval_loss"], 100 * eval_metrics["eval_top1"],
                         100 * eval_metrics["eval_top5"])
          window_start = time.perf_counter()  # evaluation time is not training throughput.
  finally:
    profiler.close()
    watchdog.close()
    checkpointer.close()  # waits for saves in flight: a started checkpoint is never lost.
    if writer:
      writer.close()
  return eval_metrics


def _check(step_: int, metrics, config, last_checkpoint) -> None:
  """Stops at a non-finite step (unless skipping them); warns about a skipped one."""
  if config.skip_nonfinite_steps:
    if float(metrics["nonfinite_grads"]) > 0:
      logging.warning("step %d had non-finite gradients; skipped it (parameters unchanged).",
                      step_)
    return
  faults.check_finite(step_, jax.device_get(metrics), last_checkpoint)


def _log_row(window, schedule, global_batch, seconds, writer, progress) -> None:
  """Writes the mean of the window's metrics (process 0) and a console line."""
  steps, metrics = zip(*window)
  metrics = jax.device_get(metrics)
  row = {k: float(np.mean([m[k] for m in metrics])) for k in metrics[0]}
  row["learning_rate"] = float(schedule(steps[-1] - 1))
  row["images_per_sec"] = len(window) * global_batch / seconds
  if writer:
    writer.write(steps[-1], row)
    progress.log(steps[-1], row)


def _run_description(config, plan) -> dict:
  """What a checkpoint records about the run that wrote it (see checkpointing.py)."""
  return {"model": config.model, "dataset": config.dataset, "image_size": config.image_size,
          "input_shards": config.input_shards, "seed": config.seed,
          "global_batch_size": config.global_batch_size, "optimizer": config.optimizer,
          "state_kind": "replicas" if plan.scheme in partitioning.LOCAL_SGD else "synchronous",
          "parallelism": plan.scheme, "mesh": f"{plan.data}x{plan.model}"}


def _peer_hint() -> str:
  if jax.process_count() > 1:
    return (f"another of the {jax.process_count()} processes has probably died or hung "
            f"(this is process {jax.process_index()}).")
  return "the step is hung (raise config.step_timeout_s if steps are really this slow)."

"""train_and_evaluate(config, workdir): run → mesh → state → data → loop → metrics.

The loop is the same for every scheme; `config.parallelism` and `config.mesh` only change the plan
(hybrid_parallel.partitioning) that the mesh, the state's shardings and the step are built from
(experiment.resolve, then experiment.build).
"""

import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

import experiment
import input_pipeline
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel import checkpointing, faults, metric_writers, models, partitioning, profiling
from hybrid_parallel.errors import UserError


def evaluate(eval_step, variables, dataset, *, sharding, batch: int) -> dict[str, float]:
  """Mean loss, top-1 and top-5 accuracy over the whole test set."""
  sums = None
  for images, labels, weights in input_pipeline.eval_batches(dataset, sharding, batch):
    out = eval_step(variables, images, labels, weights)
    # Blocking on the previous sums bounds the steps in flight, as in the training loop.
    sums = out if sums is None else jax.tree.map(jnp.add, jax.block_until_ready(sums), out)
  sums = jax.device_get(sums)
  count = float(sums.pop("count"))
  return {k: float(v) / count for k, v in sums.items()}


def train_and_evaluate(config: ml_collections.ConfigDict | experiment.RunSpec,
                       workdir: str) -> dict[str, float]:
  """Trains `config` and writes metrics to `workdir`; returns the final eval metrics.

  `config` is a ConfigDict (resolved here, for this job's processes) or the RunSpec
  `experiment.resolve` made of one (main.py resolves before anything starts). A workdir with
  checkpoints resumes from the newest; one whose run is finished is evaluated, not trained.

  Raises:
    UserError: for a config, mesh or dataset that cannot work, before any training.
    faults.Stopped: after SIGTERM or SIGINT, once the checkpoint of the step in flight is saved.
  """
  spec = (config if isinstance(config, experiment.RunSpec) else
          experiment.resolve(config, processes=jax.process_count()))  # before any data is read.
  if spec.processes != jax.process_count():  # its checks were made for another job.
    raise UserError(f"the run was resolved for {spec.processes} process(es) but this job has "
                    f"{jax.process_count()}; resolve it with processes=jax.process_count().")
  plan, loop = spec.plan, spec.loop
  devices, note = mesh_lib.pick_devices(plan.data * plan.model)
  if note:
    logging.warning(note)
  dataset = experiment.load_dataset(spec)
  global_batch = spec.global_batch_size
  steps_per_epoch = input_pipeline.steps_per_epoch(dataset, global_batch)
  total_steps = experiment.steps_to_train(spec, steps_per_epoch)
  run = experiment.build(spec, num_classes=dataset.num_classes, channels=dataset.channels,
                         steps_per_epoch=steps_per_epoch, total_steps=total_steps,
                         devices=devices, abstract=True)
  mesh, scheme, schedule = run.mesh, run.scheme, run.schedule
  batch_sharding = run.batch_sharding
  evaluated = jax.eval_shape(scheme.eval_variables, scheme.state)  # shapes only.
  logging.info("%s: %s on a %d×%d mesh of %s devices, global batch %d, %d steps (%d per epoch), "
               "%s parameters", spec.model.name, plan.scheme, plan.data, plan.model,
               devices[0].platform, global_batch, total_steps, steps_per_epoch,
               f"{models.count_params(evaluated['params']):,}")

  checkpointer = checkpointing.Checkpointer(
      os.path.join(workdir, "checkpoints"), loop.checkpoint_every_steps, loop.checkpoint_keep,
      _run_description(spec))
  restored = checkpointer.restore_latest(scheme.state)
  if restored and restored.step >= total_steps:
    checkpointer.close()
    return _report_finished(run, restored, dataset, workdir=workdir, total_steps=total_steps)
  if restored:
    state, first_step = restored.state, restored.step
    logging.info("resumed from the checkpoint at step %d (written by %s on a %s mesh); the data "
                 "continue from position %s.", first_step, restored.meta.get("parallelism"),
                 restored.meta.get("mesh"), restored.meta.get("data_position"))
  else:
    state, first_step = scheme.init(), 0
  batches = input_pipeline.train_iterator(
      dataset, batch_sharding, global_batch, seed=spec.seed,
      position=input_pipeline.start_position(
          dataset, first_step, global_batch,
          saved=restored.meta.get("data_position") if restored else None))

  is_logger = jax.process_index() == 0
  writer = metric_writers.MetricWriter(workdir, first_step=first_step) if is_logger else None
  progress = metric_writers.Progress(total_steps, first_step)
  chance = faults.ChanceWatch(dataset.num_classes,
                              round(spec.schedule.warmup_epochs * steps_per_epoch))
  watchdog = faults.Watchdog(loop.step_timeout_s, _peer_hint())
  profiler = profiling.StepProfiler(workdir, first_step, loop.profile_steps)
  skip_nonfinite = spec.step.skip_nonfinite_steps
  last_checkpoint = restored.step if restored else None
  window, window_start = [], time.perf_counter()  # (step, metrics) since the last log row.
  previous = None  # (step, metrics) of the step before the one in flight.
  eval_metrics = {}
  try:
    with jax.set_mesh(mesh), faults.Preemption() as preemption:
      for step in range(first_step, total_steps):
        images, labels, data_position = next(batches)
        profiler.before(step)
        state, metrics = scheme.train_step(state, images, labels)
        profiler.after(step, metrics)
        done = step + 1
        if previous:
          # At most two steps in flight. Deeper queues gain nothing and can starve XLA:CPU's thread
          # pool when simulated devices block in a collective's rendezvous (a 40 s abort).
          _check(*previous, skip_nonfinite=skip_nonfinite, last_checkpoint=last_checkpoint)
        previous = (done, metrics)
        window.append(previous)
        watchdog.beat()
        stopping = preemption.requested
        saving = checkpointer.due(done) or stopping or done == total_steps
        logging_row = done % loop.log_every_steps == 0 or done == total_steps or stopping
        if saving or logging_row:  # never save or log a non-finite step.
          _check(done, metrics, skip_nonfinite=skip_nonfinite, last_checkpoint=last_checkpoint)
        if saving:
          checkpointer.save(done, state, input_pipeline.global_position(data_position))
          last_checkpoint = done
        if logging_row:
          _log_row(window, schedule=schedule, global_batch=global_batch,
                   seconds=time.perf_counter() - window_start, writer=writer, progress=progress,
                   chance=chance)
          window, window_start = [], time.perf_counter()
        if stopping:
          checkpointer.wait()
          stopped = faults.Stopped(preemption.received, done)
          logging.warning("%s", stopped)
          raise stopped
        if done % loop.eval_every_steps == 0 or done == total_steps:
          eval_metrics = evaluate(run.eval_step, scheme.eval_variables(state), dataset,
                                  sharding=batch_sharding, batch=spec.eval_batch_size)
          if is_logger:
            writer.write(done, eval_metrics)
            logging.info("eval at step %d | %s", done, _describe(eval_metrics))
          window_start = time.perf_counter()  # evaluation time is not training throughput.
  finally:
    batches.close()  # stops the input thread before anything it uses is torn down.
    profiler.close()
    watchdog.close()
    checkpointer.close()  # waits for saves in flight: a started checkpoint is never lost.
    if writer:
      writer.close()
  return eval_metrics


def _describe(eval_metrics: dict[str, float]) -> str:
  return (f"loss {eval_metrics['eval_loss']:.4f} | top-1 {100 * eval_metrics['eval_top1']:.2f}% "
          f"| top-5 {100 * eval_metrics['eval_top5']:.2f}%")


def _report_finished(run: experiment.Experiment, restored, dataset, *, workdir: str,
                     total_steps: int) -> dict[str, float]:
  """A finished run started again: its final evaluation, from its last checkpoint; no training,
  nothing written."""
  with jax.set_mesh(run.mesh):
    eval_metrics = evaluate(run.eval_step, run.scheme.eval_variables(restored.state), dataset,
                            sharding=run.batch_sharding, batch=run.spec.eval_batch_size)
  logging.info("the run in %s is finished (its checkpoint is at step %d of %d); nothing to "
               "train. Its final evaluation: %s", workdir, restored.step, total_steps,
               _describe(eval_metrics))
  return eval_metrics


def _check(step: int, metrics, *, skip_nonfinite: bool, last_checkpoint) -> None:
  """Stops at a non-finite step (unless skipping them); warns about a skipped one."""
  if skip_nonfinite:
    if float(metrics["nonfinite_grads"]) > 0:
      logging.warning("step %d had non-finite gradients; skipped it (parameters unchanged).",
                      step)
    return
  faults.check_finite(step, jax.device_get(metrics), last_checkpoint)


def _log_row(window, *, schedule, global_batch: int, seconds: float, writer, progress,
             chance: faults.ChanceWatch) -> None:
  """Writes the mean of the window's metrics (process 0) and a console line."""
  steps, metrics = zip(*window)
  metrics = jax.device_get(metrics)
  row = {k: float(np.mean([m[k] for m in metrics])) for k in metrics[0]}
  row["learning_rate"] = float(schedule(steps[-1] - 1))
  row["images_per_sec"] = len(window) * global_batch / seconds
  if writer:
    writer.write(steps[-1], row)
    progress.log(steps[-1], row)
    chance.observe(steps[-1], row["train_loss"], row["learning_rate"])


def _run_description(spec: experiment.RunSpec) -> dict:
  """What a checkpoint records about the run that wrote it (see checkpointing.py)."""
  plan = spec.plan
  return {"model": spec.model.name, "dataset": spec.data.dataset, "image_size": spec.image_size,
          "input_shards": spec.data.input_shards, "seed": spec.seed,
          "global_batch_size": spec.global_batch_size, "optimizer": spec.optimizer.optimizer,
          "fc_updates_per_step": spec.step.fc_updates_per_step,
          "state_kind": "replicas" if plan.scheme in partitioning.LOCAL_SGD else "synchronous",
          "parallelism": plan.scheme, "mesh": f"{plan.data}x{plan.model}"}


def _peer_hint() -> str:
  if jax.process_count() > 1:
    return (f"another of the {jax.process_count()} processes has probably died or hung "
            f"(this is process {jax.process_index()}).")
  return "the step is hung (raise config.step_timeout_s if steps are really this slow)."

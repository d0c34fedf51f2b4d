"""train_and_evaluate(spec, workdir): run → mesh → state → data → loop → metrics.

The loop is the same for every scheme; `config.parallelism` and `config.mesh` only change the plan
(hybrid_parallel.partitioning) that the mesh, the state's shardings and the step are built from
(experiment.resolve, then experiment.build). `train_config(config, workdir)` resolves a config
and trains it, for tests, benchmarks and notebooks that hold a ConfigDict.
"""

import contextlib
import dataclasses
import logging as std_logging
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

import experiment
import input_pipeline
import validation
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel import checkpointing, faults, metric_writers, models, platforms, profiling
from hybrid_parallel.errors import UserError


def evaluate(eval_step, variables, dataset, *, sharding, batch: int) -> dict[str, float]:
  """Mean loss, top-1 and top-5 accuracy over the whole test set; `eval_step(variables, batch)`
  takes the batches as the source sends them (experiment.FedSteps.evaluate)."""
  sums = None
  for batch_of_inputs in input_pipeline.eval_batches(dataset, sharding, batch):
    out = eval_step(variables, batch_of_inputs)
    # Blocking on the previous sums bounds the steps in flight, as in the training loop.
    sums = out if sums is None else jax.tree.map(jnp.add, jax.block_until_ready(sums), out)
  sums = jax.device_get(sums)
  count = float(sums.pop("count"))
  return {k: float(v) / count for k, v in sums.items()}


def train_config(config: ml_collections.ConfigDict, workdir: str, *,
                 accept_changes=()) -> dict[str, float]:
  """`train_and_evaluate` of `config`, resolved for this job's processes; its progress lines
  (the compile, each log step with its ETA, each evaluation) shown as main.py shows them."""
  with _progress_shown():
    return train_and_evaluate(experiment.resolve(config, processes=jax.process_count()),
                              workdir, accept_changes=accept_changes)


@contextlib.contextmanager
def _progress_shown():
  """absl's INFO lines for the run's length where nothing shows them: outside `app.run` (a
  notebook, a script of the user's) absl logs at WARNING, and the loop would train for minutes
  in silence. Under app.run (main.py, the studies) or after the user's own
  `logging.set_verbosity(logging.INFO)` they show already, and nothing changes (no line twice)."""
  if logging.get_absl_logger().isEnabledFor(std_logging.INFO):
    yield
    return
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.INFO)
  try:
    yield
  finally:
    logging.set_verbosity(verbosity)


def train_and_evaluate(spec: experiment.RunSpec, workdir: str, *,
                       accept_changes=()) -> dict[str, float]:
  """Trains the run `spec` (experiment.resolve) and writes metrics to `workdir`; returns the final
  eval metrics. A workdir with checkpoints resumes from the newest — where its run is this one:
  a config that changes the training is refused unless each changed field is named in
  `accept_changes` (the changes are then logged and noted in metrics.jsonl; see
  validation.restart_changes). One whose run is finished is evaluated, not trained.

  Raises:
    UserError: for a run resolved for another process count, a mesh or dataset that cannot work,
      a checkpoint of another run, before any training.
    faults.Stopped: after SIGTERM or SIGINT, once the checkpoint of the step in flight is saved.
  """
  if spec.processes != jax.process_count():  # its checks were made for another job.
    raise UserError(f"the run was resolved for {spec.processes} process(es) but this job has "
                    f"{jax.process_count()}; resolve it with processes=jax.process_count().")
  directory = os.path.join(workdir, "checkpoints")
  with contextlib.ExitStack() as opened:  # each closed once, in reverse order, on every path.

    def open_checkpointer():
      return opened.enter_context(contextlib.closing(checkpointing.Checkpointer(
          directory, spec.loop.checkpoint_every_steps, spec.loop.checkpoint_keep,
          _run_description(spec))))

    checkpointer, changes = None, {}
    if os.path.isdir(directory):  # a run to go on with: is it this one? Before any work.
      checkpointer = open_checkpointer()
      changes = _changes_asked(spec, checkpointer, accept_changes)
    job = _Job.start(spec)
    checkpointer = checkpointer or open_checkpointer()
    restored = checkpointer.restore_latest(job.run.scheme.state)
    if restored and restored.step >= job.total_steps:
      return _report_finished(job.fed(to_train=False), restored, workdir=workdir)
    job = job.fed()  # the training set placed where its source keeps it, the steps made.
    if restored:
      logging.info("resumed from the checkpoint at step %d (written by %s on a %s mesh); the "
                   "data continue from position %s.", restored.step,
                   restored.meta.get("parallelism"), restored.meta.get("mesh"),
                   restored.meta.get("data_position"))
    if not job.steps.weighed:
      logging.info("compiling the step for the %d×%d mesh (%s) …", spec.plan.data,
                   spec.plan.model, spec.plan.scheme)
    compiles = opened.enter_context(contextlib.closing(_Compiles()))
    first_step = restored.step if restored else 0
    state = restored.state if restored else job.run.scheme.init()
    loop = _Loop(job, checkpointer, opened, workdir=workdir, first_step=first_step,
                 last_checkpoint=restored.step if restored else None, compiles=compiles)
    if restored and changes and loop.writer:
      loop.writer.note_changes(first_step, changes)
    # The input thread stops first, before anything it uses is torn down.
    batches = opened.enter_context(contextlib.closing(input_pipeline.train_iterator(
        job.dataset, job.run.batch_sharding, spec.global_batch_size, seed=spec.seed,
        position=input_pipeline.start_position(
            job.dataset, first_step, spec.global_batch_size,
            saved=restored.meta.get("data_position") if restored else None))))
    preemption = opened.enter_context(faults.Preemption())
    opened.enter_context(jax.set_mesh(job.run.mesh))
    for step in range(first_step, job.total_steps):
      images, labels, data_position = next(batches)
      state = loop.step(step, state, images=images, labels=labels, data_position=data_position,
                        preemption=preemption)
  return loop.eval_metrics


def _changes_asked(spec: experiment.RunSpec, checkpointer: checkpointing.Checkpointer,
                   accept_changes) -> dict[str, tuple]:
  """The fields this run changes from the one whose newest checkpoint it goes on from, each
  named in `accept_changes` and logged; a UserError for any other change of the training."""
  latest = checkpointer.latest_meta()
  if latest is None:
    return {}
  step, written = latest
  where = f"the checkpoint at step {step} in {checkpointer.manager.directory}"
  changes = validation.restart_changes(written, spec.config_values(), accepted=accept_changes,
                                       where=where)
  if changes:
    logging.warning("going on from %s with changes asked for: %s.", where, "; ".join(
        f"{field} {before!r} → {after!r}" for field, (before, after) in changes.items()))
  return changes


@dataclasses.dataclass(frozen=True)
class _Job:
  """A run's objects on this job's devices, its data and its length."""
  spec: experiment.RunSpec
  run: experiment.Experiment  # its state abstract: initialised or restored by the caller.
  dataset: object  # an input_pipeline source.
  steps_per_epoch: int
  total_steps: int
  # The train and eval steps with the source's input work inside (experiment.feed), made by
  # `fed`.
  steps: experiment.FedSteps | None = None

  @classmethod
  def start(cls, spec: experiment.RunSpec) -> "_Job":
    plan = spec.plan
    devices, note = mesh_lib.pick_devices(plan.data, plan.model,
                                          cpu_stand_ins=platforms.cpu_stand_ins_asked())
    if note:
      logging.warning(note)
    dataset = experiment.load_dataset(spec)
    steps_per_epoch = input_pipeline.steps_per_epoch(dataset, spec.global_batch_size)
    total_steps = experiment.steps_to_train(spec, steps_per_epoch)
    run = experiment.build(spec, num_classes=dataset.num_classes, channels=dataset.channels,
                           steps_per_epoch=steps_per_epoch, total_steps=total_steps,
                           devices=devices, abstract=True)
    evaluated = jax.eval_shape(run.scheme.eval_variables, run.scheme.state)  # shapes only.
    logging.info("%s: %s on a %d×%d mesh of %s devices, global batch %d, %d steps (%d per "
                 "epoch), %s parameters", spec.model.name, plan.scheme, plan.data, plan.model,
                 devices[0].platform, spec.global_batch_size, total_steps, steps_per_epoch,
                 f"{models.count_params(evaluated['params']):,}")
    return cls(spec, run, dataset, steps_per_epoch, total_steps)

  def fed(self, *, to_train: bool = True) -> "_Job":
    """This job with its steps fed by its data (experiment.feed): to train, with the training
    set placed where its source keeps it; else (a finished run's evaluation) with nothing
    compiled to weigh the step and nothing placed."""
    dataset, steps = experiment.feed(self.spec, self.run, self.dataset, weigh=to_train)
    return dataclasses.replace(self, dataset=dataset,
                               steps=steps.placed() if to_train else steps)

  def evaluate(self, state) -> dict[str, float]:
    return evaluate(self.steps.evaluate, self.run.scheme.eval_variables(state), self.dataset,
                    sharding=self.run.batch_sharding, batch=self.spec.eval_batch_size)

  def probe_batch(self):
    """The first `probe_examples` training images as one evaluation batch on the devices, as the
    source sends it."""
    examples = self.spec.loop.probe_examples
    if examples > self.dataset.num_train:
      raise UserError(f"probe_examples {examples} is more than the {self.dataset.num_train} "
                      f"training images of {self.spec.data.dataset}.")
    (batch,) = input_pipeline.eval_batches(self.dataset.probe(examples),
                                           self.run.batch_sharding, examples)
    return batch


class _Loop:
  """What happens around each step: at most two steps in flight, the non-finite check (one step
  behind, so it never stands between a step and its inputs), checkpoints, log rows, evaluation
  and the stop on a signal. What it opens, `opened` closes."""

  def __init__(self, job: _Job, checkpointer: checkpointing.Checkpointer,
               opened: contextlib.ExitStack, *, workdir: str, first_step: int,
               last_checkpoint: int | None, compiles: "_Compiles"):
    spec, total = job.spec, job.total_steps
    self.job, self.checkpointer, self.last_checkpoint = job, checkpointer, last_checkpoint
    self.first_step, self.compiles = first_step, compiles
    self.writer = (opened.enter_context(contextlib.closing(
        metric_writers.MetricWriter(workdir, first_step=first_step)))
        if jax.process_index() == 0 else None)
    self.progress = metric_writers.Progress(total, first_step)
    self.chance = faults.ChanceWatch(job.dataset.num_classes,
                                     round(spec.schedule.warmup_epochs * job.steps_per_epoch))
    self.watchdog = opened.enter_context(contextlib.closing(
        faults.Watchdog(spec.loop.step_timeout_s, _peer_hint())))
    self.profiler = opened.enter_context(contextlib.closing(
        profiling.StepProfiler(workdir, first_step, spec.loop.profile_steps)))
    self.window, self.window_start = [], time.perf_counter()  # (step, metrics) since a log row.
    # The probe's batch, and its sums of the steps since a log row (fetched when it is written).
    self.probe = job.probe_batch() if spec.loop.probe_examples else None
    self.probes = []
    self.previous = None  # (step, metrics) of the step before the one in flight.
    self.eval_metrics = {}

  def step(self, step: int, state, *, images, labels, data_position, preemption):
    """Runs step `step` and what is due after it; returns the new state."""
    loop, total = self.job.spec.loop, self.job.total_steps
    self.profiler.before(step)
    if step == self.first_step:
      state, metrics = self._first_step(state, images, labels, step)
    else:
      state, metrics = self.job.steps.train(state, images, labels, step=step)
    self.profiler.after(step, metrics)
    done = step + 1
    if self.probe:
      self.probes.append((done, self.job.steps.evaluate(
          self.job.run.scheme.eval_variables(state), self.probe)))
    if self.previous:
      # At most two steps in flight. Deeper queues gain nothing and can starve XLA:CPU's thread
      # pool when simulated devices block in a collective's rendezvous (a 40 s abort).
      self._check(*self.previous)
    self.previous = (done, metrics)
    self.window.append(self.previous)
    self.watchdog.beat()
    stopping = preemption.requested
    saving = self.checkpointer.due(done) or stopping or done == total
    logging_row = done % loop.log_every_steps == 0 or done == total or stopping
    if saving or logging_row:  # never save or log a non-finite step.
      self._check(done, metrics)
    if saving:
      self.checkpointer.save(done, state, input_pipeline.global_position(data_position))
      self.last_checkpoint = done
    if logging_row:
      self._log_row()
    if stopping:
      self.checkpointer.wait()
      stopped = faults.Stopped(preemption.received, done)
      logging.warning("%s", stopped)
      raise stopped
    if done % loop.eval_every_steps == 0 or done == total:
      self.eval_metrics = self.job.evaluate(state)
      if self.writer:
        self.writer.write(done, self.eval_metrics)
        logging.info("eval at step %d | %s", done, _describe(self.eval_metrics))
      self.window_start = time.perf_counter()  # evaluation time is not training throughput.
    return state

  def _first_step(self, state, images, labels, step: int):
    """The first step, and how long JAX compiled since the run said it compiles (the parameters'
    initialisation, the step with its input work) and how long the step itself ran:
    until then a run on a CPU is silent for tens of seconds (minutes for the big configs)."""
    start = time.time()  # the clock of JAX's event spans.
    state, metrics = self.job.steps.train(state, images, labels, step=step)
    jax.block_until_ready(metrics)
    ran = time.time() - start - self.compiles.seconds(since=start)
    logging.info("%scompiled in %.1f s; the first step ran in %.2f s.",
                 "the step was compiled when it was weighed; the rest " if self.job.steps.weighed
                 else "", self.compiles.seconds(), max(ran, 0.0))
    self.compiles.close()
    return state, metrics

  def _check(self, step: int, metrics) -> None:
    """Stops at a non-finite step (unless skipping them); warns about a skipped one."""
    if self.job.spec.step.skip_nonfinite_steps:
      if float(metrics["nonfinite_grads"]) > 0:
        logging.warning("step %d had non-finite gradients; skipped it (parameters unchanged).",
                        step)
      return
    faults.check_finite(step, jax.device_get(metrics), self.last_checkpoint)

  def _log_row(self) -> None:
    """Writes the mean of the window's metrics (process 0) and a console line."""
    steps, metrics = zip(*self.window)
    metrics = jax.device_get(metrics)
    row = {k: float(np.mean([m[k] for m in metrics])) for k in metrics[0]}
    row["learning_rate"] = float(self.job.run.schedule(steps[-1] - 1))
    row["images_per_sec"] = (len(self.window) * self.job.spec.global_batch_size /
                             (time.perf_counter() - self.window_start))
    if self.writer:
      for step, sums in jax.device_get(self.probes):
        count = float(sums["count"])
        self.writer.write(step, {"probe_loss": float(sums["eval_loss"]) / count,
                                 "probe_top1": float(sums["eval_top1"]) / count})
      self.writer.write(steps[-1], row)
      self.progress.log(steps[-1], row)
      self.chance.observe(steps[-1], row["train_loss"], row["learning_rate"])
    self.window, self.window_start, self.probes = [], time.perf_counter(), []


# The events JAX records, with their time span, while it makes a program: tracing, lowering and
# XLA's compile (or the program's retrieval from the persistent compilation cache).
_COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration",
                   "/jax/core/compile/backend_compile_duration")


class _Compiles:
  """The spans of JAX's compile events (`_COMPILE_EVENTS`, as JAX reports them, from any thread)
  from its creation until `close`."""

  def __init__(self):
    self._spans, self._open = [], True
    jax.monitoring.register_event_time_span_listener(self._heard)

  def _heard(self, event: str, start_s: float, end_s: float, **_) -> None:
    if event in _COMPILE_EVENTS:
      self._spans.append((start_s, end_s))

  def seconds(self, *, since: float = float("-inf")) -> float:
    """Seconds JAX compiled (the union of the spans) after `since` (time.time())."""
    return _covered([(max(start, since), end) for start, end in self._spans if end > since])

  def close(self) -> None:
    if self._open:
      jax.monitoring.unregister_event_time_span_listener(self._heard)
      self._open = False


def _covered(spans: list[tuple[float, float]]) -> float:
  """Seconds covered by the union of (start, end) spans: a program traced inside another's
  tracing records a span within the outer one, which must count once."""
  total, reached = 0.0, float("-inf")
  for start, end in sorted(spans):
    total += max(0.0, end - max(start, reached))
    reached = max(reached, end)
  return total


def _describe(eval_metrics: dict[str, float]) -> str:
  return (f"loss {eval_metrics['eval_loss']:.4f} | top-1 {100 * eval_metrics['eval_top1']:.2f}% "
          f"| top-5 {100 * eval_metrics['eval_top5']:.2f}%")


def _report_finished(job: _Job, restored, *, workdir: str) -> dict[str, float]:
  """A finished run started again: its final evaluation, from its last checkpoint; no training,
  nothing written."""
  with jax.set_mesh(job.run.mesh):
    eval_metrics = job.evaluate(restored.state)
  logging.info("the run in %s is finished (its checkpoint is at step %d of %d); nothing to "
               "train. Its final evaluation: %s", workdir, restored.step, job.total_steps,
               _describe(eval_metrics))
  return eval_metrics


def _run_description(spec: experiment.RunSpec) -> dict:
  """What a checkpoint records about the run that wrote it (see checkpointing.py)."""
  plan = spec.plan
  return {"config": spec.config_values(), "model": spec.model.name,
          "image_size": spec.image_size, "optimizer": spec.optimizer.optimizer,
          "fc_updates_per_step": spec.step.fc_updates_per_step,
          "state_kind": "replicas" if plan.local_sgd else "synchronous",
          "parallelism": plan.scheme, "mesh": f"{plan.data}x{plan.model}"}


def _peer_hint() -> str:
  if jax.process_count() > 1:
    return (f"another of the {jax.process_count()} processes has probably died or hung "
            f"(this is process {jax.process_index()}).")
  return "the step is hung (raise config.step_timeout_s if steps are really this slow)."

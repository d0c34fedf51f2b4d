"""train_and_evaluate(config, workdir): mesh → state → data → loop → metrics.

The loop is the same for every scheme; `config.parallelism` and `config.mesh` only change the plan
(hybrid_parallel.partitioning) that the mesh, the state's shardings and the step are built from.
"""

import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from jax.sharding import NamedSharding

import input_pipeline
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel import metric_writers, models, optim, partitioning, schemes, step


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
  mesh = mesh_lib.make_mesh(plan.data, plan.model, devices)
  dataset = input_pipeline.load(config)
  model = models.build(config.model, dataset.num_classes, plan.layout, config.image_size,
                       config.dropout_rate, config.sync_batch_norm)

  global_batch = config.global_batch_size
  steps_per_epoch = input_pipeline.steps_per_epoch(dataset, global_batch)
  total_steps = _total_steps(config, steps_per_epoch)
  schedule = optim.learning_rate_schedule(config, global_batch, steps_per_epoch, total_steps)
  tx = optim.make_optimizer(config, schedule,
                            partitioning.sharded_axes(plan, model.arch.fc_names()[-1]))
  image_shape = models.input_shape(config.model, config.image_size, dataset.channels)
  scheme = schemes.build(config, model, plan, mesh, tx, image_shape)
  state, train_step = scheme.state, scheme.train_step
  eval_step = step.make_eval_step(model, plan, mesh, scheme.eval_specs)
  batch_sharding = NamedSharding(mesh, plan.batch_spec)
  logging.info("%s: %s on a %d×%d mesh of %s devices, global batch %d, %d steps (%d per epoch), "
               "%s parameters", config.model, config.parallelism, plan.data, plan.model,
               devices[0].platform, global_batch, total_steps, steps_per_epoch,
               f"{models.count_params(scheme.eval_variables(state)['params']):,}")

  is_logger = jax.process_index() == 0
  writer = metric_writers.MetricWriter(workdir) if is_logger else None
  progress = metric_writers.Progress(total_steps)
  window, window_start = [], time.perf_counter()
  eval_metrics = {}
  try:
    with jax.set_mesh(mesh):
      for s in range(total_steps):
        images, labels = input_pipeline.train_batch(dataset, batch_sharding, global_batch,
                                                    config.seed, s)
        state, metrics = train_step(state, images, labels)
        if window:
          # At most two steps in flight. Deeper queues gain nothing and can starve XLA:CPU's thread
          # pool when simulated devices block in a collective's rendezvous (a 40 s abort).
          jax.block_until_ready(window[-1])
        window.append(metrics)
        done = s + 1
        if done % config.log_every_steps == 0 or done == total_steps:
          window = jax.device_get(window)
          row = {k: float(np.mean([m[k] for m in window])) for k in window[0]}
          row["learning_rate"] = float(schedule(s))
          row["images_per_sec"] = len(window) * global_batch / (time.perf_counter() - window_start)
          if not np.isfinite(row["train_loss"]):
            raise FloatingPointError(
                f"the training loss became {row['train_loss']} by step {done}.")
          if is_logger:
            writer.write(done, row)
            progress.log(done, row)
          window, window_start = [], time.perf_counter()
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
    if writer:
      writer.close()
  return eval_metrics

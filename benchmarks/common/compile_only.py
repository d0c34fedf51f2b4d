"""What the compile-only benchmarks (tpu_compile, gpu_compile) share: the configs they compile by
name, what a compiled program holds (HBM, bytes sent against the analytic minimum), and the
compile itself and the search for the largest batch that fits. Imported, not run."""

import time

import jax.numpy as jnp

import configs
import experiment
from hybrid_parallel import models
from hybrid_parallel.analysis import costmodel, hlo_stats
from hybrid_parallel.errors import UserError

# Table 1's rows, Krizhevsky's FC passes (owt8:b, owt8:c), model averaging and the large-batch
# base: each compiled at the papers' sizes.
CONFIGS = (*configs.TABLE1, "owt8:b", "owt8:c", "averaging4", "large_batch")
CONFIGS_HELP = "Configs (NAME, or owt8:b / owt8:c for Krizhevsky's FC passes)."
IMAGE_SIZE, NUM_CLASSES = 224, 1000


def config(name: str, dtype: str, **overrides):
  """The config `name` at the papers' image size in `dtype`: a file of configs/ by name, owt8:b
  or owt8:c (owt8 with Krizhevsky's FC passes), or data8 (owt8's network and batch, data-parallel
  on 8 devices: what his one weird trick is set against)."""
  config_name, _, variant = name.partition(":")
  result = configs.get("owt8" if name == "data8" else config_name)
  if name == "data8":
    result.parallelism, result.mesh.data, result.mesh.model = "data", 8, 1
  result.update({"image_size": IMAGE_SIZE, "dtype": dtype, **overrides})
  if variant:
    result.owt_variant = variant
  return result


class NotCompiled(Exception):
  """Why a config's step did not compile for a topology: a row's result, not an error."""


def compile_for(config, devices):
  """`config`'s train step as train.py builds it (experiment.lower_train_step), lowered for
  `devices` and compiled: (the lowered step, the compiled program, compile seconds).

  Raises:
    NotCompiled: with its reason in one line (the mesh's rule, XLA's out of memory).
  """
  try:
    step = experiment.lower_train_step(experiment.resolve(config), num_classes=NUM_CLASSES,
                                       devices=devices)
  except (UserError, ValueError) as e:  # e.g. jax.make_mesh's rule for megacore chips.
    raise NotCompiled(" ".join(str(e).split())[:300]) from e
  start = time.perf_counter()
  try:
    compiled = step.lowered.compile()
  except Exception as e:  # noqa: BLE001 — XLA's reason (out of memory, say) is the row's result.
    raise NotCompiled(" ".join(str(e).split())[:300]) from e
  return step, compiled, time.perf_counter() - start


def program_facts(compiled, *, config, plan) -> dict:
  """A compiled step's HBM per device and the bytes each device of its mesh sends, against the
  analytic minimum: gradients in float32 (the parameters' dtype), activations at the compute
  dtype's width."""
  memory = compiled.memory_analysis()
  # Per device of the mesh, which may be fewer than the topology's: a permute's bytes are shared
  # among the devices that take part, not the idle ones.
  sent = sum(s.bytes_per_device
             for s in hlo_stats.collective_stats(compiled.as_text(), plan.data * plan.model)
             .values())
  analytic = {width: costmodel.traffic(models.ARCHITECTURES[config.model], plan,
                                       global_batch=config.global_batch_size,
                                       image_size=config.image_size, num_classes=NUM_CLASSES,
                                       bytes_per_value=width)
              for width in (4, jnp.dtype(config.dtype).itemsize)}
  return {"hbm_bytes": (memory.argument_size_in_bytes + memory.temp_size_in_bytes +
                        memory.output_size_in_bytes - memory.alias_size_in_bytes),
          "sent_bytes": sent,
          "analytic_bytes": (analytic[4].gradients +
                             analytic[jnp.dtype(config.dtype).itemsize].activations)}


def first_guess(batch: int, *, known: dict | None, capacity_bytes: float) -> int:
  """The power-of-two batch to start the search at: the largest whose HBM, scaled in proportion
  from `known` (a row of the same config at another batch), fits `capacity_bytes` (an
  underestimate: the parameters' share does not grow with the batch); `batch` without a row."""
  scale = known and known.get("compiled") and known["hbm_gib"] * 2**30 / known["global_batch"]
  while scale and scale * 2 * batch <= capacity_bytes:
    batch *= 2
  return batch


def largest_batch(attempt, first_batch: int) -> dict:
  """The largest power-of-two global batch for which `attempt(batch) -> (row, fits)` fits, from
  `first_batch`: doubled while it fits or halved until it does (two or three compiles from a
  good guess); the row says which batch was refused next, and why."""
  row, fits = attempt(first_batch)
  compiles, batch = 1, first_batch
  if not row["compiled"] and "RESOURCE_EXHAUSTED" not in row["reason"]:  # e.g. the mesh.
    return {"largest_global_batch": None, "hbm_gib": None, "next_batch": first_batch,
            "next": row["reason"], "compiles": 1}
  step = 2 if fits else 0.5
  while True:  # walk until the answer flips: the fitting batch and the refused one are known.
    following, following_fits = attempt(int(batch * step))
    compiles += 1
    if following_fits != fits:
      break
    batch, row = int(batch * step), following
  largest, refused = (row, following) if fits else (following, row)
  return {"largest_global_batch": largest["global_batch"], "hbm_gib": largest["hbm_gib"],
          "next_batch": refused["global_batch"],
          "next": refused.get("reason") or f"{refused['hbm_gib']} GiB", "compiles": compiles}


def largest_batches(compile_batch, *, known: list[dict], capacity_bytes: float) -> list[dict]:
  """The largest power-of-two global batch of `single` and of `owt8` in bfloat16 whose step fits
  `capacity_bytes`: `largest_batch` from a guess scaled from the config's bfloat16 row in `known`
  (the same topology's), `compile_batch(name, batch)` compiling one (a row)."""
  def attempt(name, batch):
    row = compile_batch(name, batch)
    return row, row["compiled"] and row["hbm_fits"]

  result = []
  for name in ("single", "owt8"):
    row = next((r for r in known if (r["config"], r["dtype"]) == (name, "bfloat16")), None)
    first = first_guess(config(name, "bfloat16").global_batch_size, known=row,
                        capacity_bytes=capacity_bytes)
    result.append({"config": name,
                   **largest_batch(lambda batch, name=name: attempt(name, batch), first)})
  return result

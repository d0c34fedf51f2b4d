r"""What the split placement of a decoded set sends per step: the compiled exchange's collective
bytes per device against the bytes of the rows each device owns, read from the HLO of the
program on CPU devices (XLA writes the same collectives for any backend's shapes), and the
all-to-all rounds a step takes over ImageNet's real order.

  python -m benchmarks.speed.split_exchange [--publish]

Writes the row under `split_exchange` in input_pipeline.json (docs/ with --publish; else
runs/input_pipeline/ or --out). Compile-only on 8 simulated CPU devices: nothing is allocated,
any machine gives the same bytes.
"""

import json

import numpy as np

IMAGENET_TRAIN = 1_281_167  # ILSVRC-2012's training images
YUV420_ROW_BYTES = 256 * 256 + 2 * 128 * 128  # one 256² image in YUV 4:2:0 (decoded.py)


def measure(*, data: int = 8, global_batch: int = 2048, num_train: int = IMAGENET_TRAIN,
            row_bytes: int = YUV420_ROW_BYTES, steps: int = 200) -> dict:
  """The split exchange of a global batch on `data` devices (its first `data` CPU devices): the
  compiled program's collective bytes per device (hlo_stats) and the rows' own; the rounds of
  `steps` steps of the real order (arrays.batch_indices, seed 0)."""
  import jax
  from jax.sharding import NamedSharding, PartitionSpec as P
  from hybrid_parallel.analysis import hlo_stats
  from input_pipeline import arrays, exchange
  mesh = jax.make_mesh((data,), (exchange.DATA,), devices=jax.devices("cpu")[:data])
  per_device = -(-num_train // data)
  capacity = exchange.capacity(global_batch, data)
  program = jax.jit(lambda held, plan: exchange.exchange(
      held, plan, mesh=mesh, rows_per_device=per_device, capacity=capacity))
  held = jax.ShapeDtypeStruct((per_device * data, row_bytes), np.uint8,
                              sharding=NamedSharding(mesh, P(exchange.DATA)))
  plan = jax.ShapeDtypeStruct((global_batch, 3), np.int32, sharding=NamedSharding(mesh, P()))
  stats = hlo_stats.collective_stats(program.lower(held, plan).compile().as_text(), data)
  sent = sum(s.bytes_per_device for s in stats.values())
  owned = global_batch // data * row_bytes
  rounds = [exchange.rounds(exchange.plan(
      arrays.batch_indices(num_train, global_batch, seed=0, step=step),
      rows_per_device=per_device, data=data, capacity=capacity)) for step in range(steps)]
  return {"data": data, "global_batch": global_batch, "num_train": num_train,
          "row_bytes": row_bytes, "capacity_rows": capacity,
          "collectives": {kind: s.ops for kind, s in stats.items() if s.ops},
          "collective_bytes_per_device": sent, "owned_rows_bytes_per_device": owned,
          "collective_over_owned": round(sent / owned, 3),
          # The reduce-scatter of the whole batch that the exchange replaces: (D−1)·b rows.
          "reduce_scatter_bytes_per_device": (data - 1) * owned,
          "steps": steps, "mean_rounds": float(np.mean(rounds)), "max_rounds": max(rounds)}


def main(argv):
  del argv
  from hybrid_parallel import platforms
  platforms.start(simulate_on_cpu=8)
  import benchmarks
  row = measure()
  print(json.dumps(row, indent=1))
  out = _OUTPUT.path("input_pipeline.json")
  benchmarks.publish({**(benchmarks.load_if_present(out) or {}), "split_exchange": row}, out)


if __name__ == "__main__":
  from absl import app
  import benchmarks
  _OUTPUT = benchmarks.define_output_flags("input_pipeline")
  app.run(main)

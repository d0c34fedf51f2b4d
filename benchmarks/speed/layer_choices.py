r"""The per-platform layer implementations of layers.py timed against the alternatives, as JSON:
max-pooling's gradient and the two-column AlexNet's grouped convolutions.

  python -m benchmarks.speed.layer_choices [--layers=max_pool,grouped_conv] [--batch=B]
                                           [--repeats=R] [--steps=5]

max_pool (--batch 32, --repeats 10 by default): for each of the one-column AlexNet's three pooling
inputs at 224² (55²×64, 27²×192, 13²×256), a jitted gradient of sum(pool(relu(x))) with
`nn.max_pool(x, (3, 3), strides=(2, 2))` (lax.reduce_window; XLA differentiates it with an
arg-max reduce-window and a scatter) and with `layers.overlapping_max_pool` (nine strided views
forward, elementwise parity-class backward); the two gradients are checked equal first. Writes a
list of rows to max_pool.json.

grouped_conv (--batch 8, --repeats 5 by default), `layers.GROUPED_CONVS`' two implementations:
* layers: forward + backward (a jitted gradient of sum(conv(x)²) in the input and the kernel) of
  conv2, conv4 and conv5 of `alexnet` at 224² with both columns on one device (5×5 over 2×48
  channels → 256; 3×3 over 2×192 → 384; 3×3 over 2×192 → 256); the two gradients are checked to
  agree first;
* steps: the whole single-device training step (`train.py`'s) of `alexnet_tiny` at 64², batch 64
  (the test network) and of `alexnet` at 224², batch --batch: the median of --steps steps.
Writes {"date", "layers": [...], "steps": [...]} to grouped_conv.json.

Everything is compiled with the step's options on this machine's platform (compiler_options.py);
each row is printed as JSON, the files go under runs/layer_choices/ (or --out; with --publish
into docs/).
"""

import json
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from flax import linen as nn

import benchmarks
from benchmarks.common import step_timing
from configs import default
from hybrid_parallel import compiler_options, layers, platforms

LAYERS = ("max_pool", "grouped_conv")
_LAYERS = benchmarks.define_choices("layers", LAYERS, "Which layers' implementations to time.")
_BATCH = flags.DEFINE_integer("batch", None, "Images per batch (default: 32 for max_pool, 8 for "
                              "grouped_conv's paper-size rows).")
_REPEATS = flags.DEFINE_integer("repeats", None, "Timed calls per variant (default: 10 for "
                                "max_pool, 5 for grouped_conv).")
_STEPS = flags.DEFINE_integer("steps", 5, "grouped_conv: timed training steps per model and "
                              "implementation.")
_OUTPUT = benchmarks.define_output_flags("layer_choices")  # max_pool.json, grouped_conv.json
POOL_SHAPES = ((55, 64), (27, 192), (13, 256))  # alexnet_owt's pool inputs at 224²: side, channels.
# alexnet's within-column convs at 224²: name, input side, input channels, filters, kernel, pad.
CONVS = (("conv2", 27, 96, 256, 5, 2), ("conv4", 13, 384, 384, 3, 1),
         ("conv5", 13, 384, 256, 3, 1))
GROUPS = 2


def max_pool_rows(options, *, batch: int, repeats: int) -> list[dict]:
  variants = {"reduce_window": lambda x: nn.max_pool(x, (3, 3), strides=(2, 2)),
              "ours": layers.overlapping_max_pool}
  rows = []
  for side, channels in POOL_SHAPES:
    x = jnp.asarray(np.random.default_rng(0).standard_normal((batch, side, side, channels),
                                                             np.float32))
    grads, medians = {}, {}
    for name, pool in variants.items():
      grad = jax.jit(jax.grad(lambda x, pool=pool: jnp.sum(pool(jax.nn.relu(x)))),
                     compiler_options=options)
      grads[name] = np.asarray(grad(x))
      medians[name] = step_timing.median_ms(lambda: grad(x).block_until_ready(), repeats)
    np.testing.assert_array_equal(grads["ours"], grads["reduce_window"])
    rows.append({"input": [batch, side, side, channels], "platform": jax.default_backend(),
                 "reduce_window_ms": round(medians["reduce_window"], 1),
                 "ours_ms": round(medians["ours"], 1),
                 "speedup": round(medians["reduce_window"] / medians["ours"], 1)})
    print(json.dumps(rows[-1]), flush=True)
  return rows


def conv_rows(options, *, batch: int, repeats: int) -> list[dict]:
  def grouped(x, w, padding):
    return jax.lax.conv_general_dilated(x, w, (1, 1), [(padding, padding)] * 2,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=GROUPS)

  implementations = {"feature_group_count": grouped,
                     "per_group": lambda x, w, padding: layers.per_group_conv(
                         x, w, stride=1, padding=padding, groups=GROUPS)}
  rows = []
  for name, side, channels, filters, kernel, padding in CONVS:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((batch, side, side, channels), np.float32))
    w = jnp.asarray(rng.standard_normal((kernel, kernel, channels // GROUPS, filters),
                                        np.float32) / np.sqrt(kernel * kernel * channels))
    grads, row = {}, {"layer": name, "input": list(x.shape), "kernel": list(w.shape),
                      "platform": jax.default_backend()}
    for implementation, conv in implementations.items():
      gradient = jax.jit(jax.grad(lambda x, w, conv=conv: jnp.sum(conv(x, w, padding) ** 2),
                                  argnums=(0, 1)), compiler_options=options)
      grads[implementation] = jax.tree.map(np.asarray, gradient(x, w))
      row[f"{implementation}_ms"] = round(step_timing.median_ms(
          lambda: jax.block_until_ready(gradient(x, w)), repeats), 1)
    for a, b in zip(grads["per_group"], grads["feature_group_count"]):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(np.abs(b).max()))
    row["speedup"] = round(row["feature_group_count_ms"] / row["per_group_ms"], 1)
    rows.append(row)
    print(json.dumps(row), flush=True)
  return rows


def conv_step_rows(*, batch: int) -> list[dict]:
  rows = []
  for model, image_size, step_batch in (("alexnet_tiny", 64, 64), ("alexnet", 224, batch)):
    row = {"model": model, "image_size": image_size, "batch": step_batch}
    for implementation in ("feature_group_count", "per_group"):
      config = default.for_scheme("single", 1, 1, global_batch_size=step_batch)
      config.update(model=model, image_size=image_size, grouped_conv=implementation)
      row[f"{implementation}_step_ms"] = step_timing.measure(
          config, num_classes=10 if model.endswith("_tiny") else 1000, steps=_STEPS.value,
          warmup=1)["step_ms"]
    row["speedup"] = round(row["feature_group_count_step_ms"] / row["per_group_step_ms"], 2)
    rows.append(row)
    print(json.dumps(row), flush=True)
  return rows


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  options = (dict(compiler_options.CPU_STEP_OPTIONS) if jax.default_backend() == "cpu"
             else None)
  if "max_pool" in _LAYERS.value:
    benchmarks.publish(max_pool_rows(options, batch=_BATCH.value or 32,
                                     repeats=_REPEATS.value or 10),
                       _OUTPUT.path("max_pool.json"))
  if "grouped_conv" in _LAYERS.value:
    batch = _BATCH.value or 8
    benchmarks.publish({"date": time.strftime("%Y-%m-%d"),
                        "layers": conv_rows(options, batch=batch, repeats=_REPEATS.value or 5),
                        "steps": conv_step_rows(batch=batch)},
                       _OUTPUT.path("grouped_conv.json"))


if __name__ == "__main__":
  app.run(main)

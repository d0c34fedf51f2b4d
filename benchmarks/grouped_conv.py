r"""The two-column AlexNet's grouped convolutions: one XLA grouped conv against one conv per
column, as JSON.

  python -m benchmarks.grouped_conv [--batch=8 --repeats=5 --steps=5]

Two measurements, both with `layers.GROUPED_CONVS`' two implementations on this machine's
platform (compiled with the step's options, compiler_options.py):

* layers: forward + backward (a jitted gradient of sum(conv(x)²) in the input and the kernel) of
  conv2, conv4 and conv5 of `alexnet` at 224² with both columns on one device (5×5 over 2×48
  channels → 256; 3×3 over 2×192 → 384; 3×3 over 2×192 → 256) at --batch; the two gradients are
  checked to agree first;
* steps: the whole single-device training step (`train.py`'s) of `alexnet_tiny` at 64², batch 64
  (the test network) and of `alexnet` at 224², batch --batch: the median of --steps steps.

Prints one JSON object per row and writes them as {"layers": [...], "steps": [...]} to --out.
"""

import json
import os
import time

from absl import app, flags

from benchmarks import step_timing, tables
from hybrid_parallel import platforms

_BATCH = flags.DEFINE_integer("batch", 8, "Images per batch of the paper-size rows.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed calls per layer and implementation.")
_STEPS = flags.DEFINE_integer("steps", 5, "Timed training steps per model and implementation.")
_OUT = flags.DEFINE_string("out", os.path.join(tables.DOCS, "grouped_conv.json"),
                           "Where the JSON goes.")
# alexnet's within-column convs at 224²: name, input side, input channels, filters, kernel, pad.
LAYERS = (("conv2", 27, 96, 256, 5, 2), ("conv4", 13, 384, 384, 3, 1),
          ("conv5", 13, 384, 256, 3, 1))
GROUPS = 2


def layer_rows(options) -> list[dict]:
  import jax
  import jax.numpy as jnp
  import numpy as np
  from hybrid_parallel import layers

  def grouped(x, w, padding):
    return jax.lax.conv_general_dilated(x, w, (1, 1), [(padding, padding)] * 2,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=GROUPS)

  implementations = {"feature_group_count": grouped,
                     "per_group": lambda x, w, padding: layers.per_group_conv(
                         x, w, stride=1, padding=padding, groups=GROUPS)}
  rows = []
  for name, side, channels, filters, kernel, padding in LAYERS:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((_BATCH.value, side, side, channels), np.float32))
    w = jnp.asarray(rng.standard_normal((kernel, kernel, channels // GROUPS, filters),
                                        np.float32) / np.sqrt(kernel * kernel * channels))
    grads, row = {}, {"layer": name, "input": list(x.shape), "kernel": list(w.shape),
                      "platform": jax.default_backend()}
    for implementation, conv in implementations.items():
      gradient = jax.jit(jax.grad(lambda x, w, conv=conv: jnp.sum(conv(x, w, padding) ** 2),
                                  argnums=(0, 1)), compiler_options=options)
      grads[implementation] = jax.tree.map(np.asarray, gradient(x, w))
      row[f"{implementation}_ms"] = round(step_timing.median_ms(
          lambda: jax.block_until_ready(gradient(x, w)), _REPEATS.value), 1)
    for a, b in zip(grads["per_group"], grads["feature_group_count"]):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(np.abs(b).max()))
    row["speedup"] = round(row["feature_group_count_ms"] / row["per_group_ms"], 1)
    rows.append(row)
    print(json.dumps(row), flush=True)
  return rows


def step_rows() -> list[dict]:
  from configs import default
  rows = []
  for model, image_size, batch in (("alexnet_tiny", 64, 64), ("alexnet", 224, _BATCH.value)):
    row = {"model": model, "image_size": image_size, "batch": batch}
    for implementation in ("feature_group_count", "per_group"):
      config = default.for_scheme("single", 1, 1, global_batch_size=batch)
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
  import jax
  from hybrid_parallel import compiler_options
  options = (dict(compiler_options.CPU_STEP_OPTIONS) if jax.default_backend() == "cpu"
             else None)
  tables.publish({"date": time.strftime("%Y-%m-%d"), "layers": layer_rows(options),
                  "steps": step_rows()}, _OUT.value)


if __name__ == "__main__":
  app.run(main)

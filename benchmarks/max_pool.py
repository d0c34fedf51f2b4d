r"""Forward + backward time of AlexNet's max-pooling: reduce_window's gradient and ours, as JSON.

  python -m benchmarks.max_pool [--batch=32 --repeats=10]

For each of the one-column AlexNet's three pooling inputs at 224² (55²×64, 27²×192, 13²×256),
times a jitted gradient of sum(pool(relu(x))) with `nn.max_pool(x, (3, 3), strides=(2, 2))`
(lax.reduce_window; XLA differentiates it with an arg-max reduce-window and a scatter) and with
`layers.overlapping_max_pool` (nine strided views forward, elementwise parity-class backward),
both compiled with the tuned XLA:CPU options. Prints one JSON object per shape with the medians and
their ratio (the two gradients are checked equal first), and writes them as a list to --out.
"""

import json
import os

from absl import app, flags

from benchmarks import step_timing, tables
from hybrid_parallel import platforms

_BATCH = flags.DEFINE_integer("batch", 32, "Images per batch.")
_REPEATS = flags.DEFINE_integer("repeats", 10, "Timed calls per variant.")
_OUT = flags.DEFINE_string("out", os.path.join(tables.DOCS, "max_pool.json"),
                           "Where the JSON list goes.")
SHAPES = ((55, 64), (27, 192), (13, 256))  # alexnet_owt's pool inputs at 224²: side, channels.


def main(argv):
  del argv
  platforms.start()  # before anything queries the devices.
  import jax
  import jax.numpy as jnp
  import numpy as np
  from flax import linen as nn
  from hybrid_parallel import compiler_options, layers

  variants = {"reduce_window": lambda x: nn.max_pool(x, (3, 3), strides=(2, 2)),
              "ours": layers.overlapping_max_pool}
  options = (dict(compiler_options.CPU_STEP_OPTIONS) if jax.default_backend() == "cpu"
             else None)
  rows = []
  for side, channels in SHAPES:
    x = jnp.asarray(np.random.default_rng(0).standard_normal(
        (_BATCH.value, side, side, channels), np.float32))
    grads, medians = {}, {}
    for name, pool in variants.items():
      grad = jax.jit(jax.grad(lambda x, pool=pool: jnp.sum(pool(jax.nn.relu(x)))),
                     compiler_options=options)
      grads[name] = np.asarray(grad(x))
      medians[name] = step_timing.median_ms(lambda: grad(x).block_until_ready(),
                                            _REPEATS.value)
    np.testing.assert_array_equal(grads["ours"], grads["reduce_window"])
    rows.append({"input": [_BATCH.value, side, side, channels],
                 "platform": jax.default_backend(),
                 "reduce_window_ms": round(medians["reduce_window"], 1),
                 "ours_ms": round(medians["ours"], 1),
                 "speedup": round(medians["reduce_window"] / medians["ours"], 1)})
    print(json.dumps(rows[-1]), flush=True)
  tables.publish(rows, _OUT.value)


if __name__ == "__main__":
  app.run(main)

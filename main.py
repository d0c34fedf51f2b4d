r"""Trains a Krizhevsky convnet with the parallelism scheme a config names.

  python main.py --config=configs/hybrid4.py [--config.num_epochs=5] [--workdir=runs/x]

On a machine without enough accelerators for the config's mesh, the mesh runs on simulated CPU
devices (exactly as many as it needs, unless --cpu_devices says otherwise).
"""

import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None,
                               "Where metrics and TensorBoard events go; default runs/<config>.")
_CPU_DEVICES = flags.DEFINE_integer(
    "cpu_devices", None, "How many CPU devices to simulate; default: as many as the mesh needs.")
flags.mark_flag_as_required("config")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  config = _CONFIG.value
  mesh = config.mesh.data * config.mesh.model
  # Must precede the first device query; it only affects the CPU backend, so it is harmless where
  # accelerators run the mesh.
  import jax
  jax.config.update("jax_num_cpu_devices", _CPU_DEVICES.value or max(1, mesh))
  import train  # Imported after the device count is set: nothing may query devices earlier.
  from hybrid_parallel.errors import UserError

  if jax.default_backend() == "cpu" and mesh > 1:
    logging.info("No accelerators: simulating %d CPU devices for the %d×%d mesh.",
                 jax.device_count(), config.mesh.data, config.mesh.model)
  workdir = _WORKDIR.value or os.path.join(
      "runs", os.path.splitext(os.path.basename(
          config_flags.get_config_filename(flags.FLAGS["config"])))[0])
  try:
    train.train_and_evaluate(config, workdir)
  except (UserError, FloatingPointError) as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)

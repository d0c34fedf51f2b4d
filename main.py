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


def _fail(message: str) -> None:
  """Reports bad input in one sentence and exits 1 (a traceback would bury the sentence)."""
  print(f"error: {message}", file=sys.stderr)
  sys.exit(1)


def _parse_flags(argv):
  """absl's flag parsing, with config-file and config-override mistakes reported in one line."""
  try:
    argv = flags.FLAGS(argv)
    _ = _CONFIG.value.mesh  # ml_collections defers a file's load error to the first access.
    return argv
  except flags.Error as e:
    _fail(str(e))
  except OSError as e:  # ml_collections could not load the config file.
    cause = str(e.__cause__ or e).strip().splitlines()[-1].strip()
    _fail(f"the config file could not be loaded: {cause}.")
  except (KeyError, AttributeError) as e:  # --config.FIELD names no field of the config.
    # ml_collections nests the KeyError's text (and a "did you mean") inside quotes; unwrap it.
    text = e.args[0] if e.args else str(e)
    while isinstance(text, BaseException):
      text = text.args[0] if text.args else str(text)
    _fail(f"the config has no such field: {' '.join(str(text).split())}")


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
    _fail(str(e))


if __name__ == "__main__":
  app.run(main, flags_parser=_parse_flags)

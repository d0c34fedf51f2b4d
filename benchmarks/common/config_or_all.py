"""The --config / --all pair of the benchmarks that measure one config or all of Table 1
(comm_volume, throughput): one validator, so that a command naming neither or both fails at
parsing, before any work."""

from absl import flags
from ml_collections import config_flags


def define_flags(*, all_help: str):
  """Defines --config (a config file) and --all (`all_help`); returns their holders."""
  config = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
  every = flags.DEFINE_bool("all", False, all_help)
  flags.register_multi_flags_validator(
      ["config", "all"], lambda given: (given["config"] is None) == given["all"],
      message="give either --config=... (one config) or --all.")
  return config, every

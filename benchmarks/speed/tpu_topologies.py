"""TPU topologies to compile for without a TPU (libtpu's compile-only devices, as MaxText's
train_compile.py uses them), with what Google Cloud's TPU pages state for one device of each:
the peak and bandwidths that benchmarks/speed/tpu_compile.py's estimates divide by."""

import dataclasses
import os

from jax.experimental import topologies


@dataclasses.dataclass(frozen=True)
class Device:
  """What Google Cloud's TPU pages state for one device of a topology (a TensorCore on v2, two
  per chip; a chip on v4 — megacore —, v5e and v6e). Bandwidths that this project has not found
  stated are None, and the estimates' floors that need them are left out."""
  peak_flops: float  # bfloat16
  hbm_bytes: int
  hbm_bytes_per_s: float | None = None
  ici_bytes_per_s: float | None = None  # one way: half the stated bidirectional figure
  # libtpu's options for the topology: v4's chips run their two TensorCores as one device
  # (megacore), and jax.make_mesh refuses a mesh of the cores (MaxText's v4-8 says the same).
  chip_config_name: str = "default"


# v2: 45 TFLOP/s and 16 GiB per chip; v4: 275 TFLOP/s, 32 GiB, HBM 1,200 GB/s; v5e: 197 TFLOP/s,
# 16 GiB, HBM 819 GB/s, ICI 400 GB/s bidirectional; v6e: 918 TFLOP/s, 32 GiB, HBM 1,638 GB/s,
# ICI 800 GB/s. (v4's ICI bandwidth per chip is not stated on its page.)
# v5e:1x1 is Colab's TPU since 2025-09 (one chip, "v5e-1"; googlecolab/colabtools#5566) and v5e:2x4
# Kaggle's v5e-8; v2:2x2 was Colab's TPU v2-8 until then (its rows are kept as history).
TOPOLOGIES = {"v2:2x2": Device(22.5e12, 8 * 2**30),
              "v4:2x2x1": Device(275e12, 32 * 2**30, 1200e9, chip_config_name="megacore"),
              "v5e:1x1": Device(197e12, 16 * 2**30, 819e9, 200e9),
              "v5e:2x4": Device(197e12, 16 * 2**30, 819e9, 200e9),
              "v6e:2x2": Device(918e12, 32 * 2**30, 1638e9, 400e9)}


def topology_devices(topology: str) -> list:
  """The compile-only devices of a TPU topology (no TPU needed: libtpu compiles for it)."""
  # Compile-only devices open no chip, so two processes may load libtpu at once (its lock file
  # otherwise refuses the second: a test run beside a benchmark, two tests at once).
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  return topologies.get_topology_desc(
      platform="tpu", topology_name=topology,
      chip_config_name=TOPOLOGIES[topology].chip_config_name).devices

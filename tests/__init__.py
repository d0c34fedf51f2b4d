"""The test suite's one setup, run before any test module is imported (pytest imports the modules
as `tests.<name>`; `python -m tests.<name>` too):

* 8 simulated CPU devices, set before anything queries the devices;
* JAX on the CPU only (JAX_PLATFORMS=cpu, unless the environment names platforms), also for the
  `main.py` processes the tests start: with libtpu installed (requirements-test.txt has it, for
  tests/tpu_compile_test.py) JAX would otherwise try to open a TPU in every process and print
  libtpu's complaints; on a GPU machine the suite likewise runs on CPU devices, as on CI;
* XLA:CPU's LLVM at optimisation level 0 (unless XLA_FLAGS names a level): the suite's programs
  are tiny, compiling them is most of their cost, and every result is judged against float64 with
  tolerances that hold for any code generation (tests/numerics.py); the `main.py` processes the
  tests start inherit it;
* XLA:GPU's autotuner off (unless XLA_FLAGS sets its level): the suite compiles programs for
  GPUs it does not have (tests/gpu_compile_test.py) to read their collectives, never to run
  them, and with no GPU to time them on, the autotuner only compiles candidate kernels (measured
  on jaxlib 0.12, 2-core AMD EPYC: gpu_compile_test's H100-node test, which builds and compiles
  one step, 6.2 s against 10.2 s with it on);
* on jaxlib 0.10, XLA:CPU's elemental emitters instead of its MLIR fusion emitters (0.10.2's
  default; later jaxlibs have only the latter): the suite's steps compile in ~40% of the time
  (measured on 0.10.2: four of them in 1.75 s against 4.63 s), and what they compute is judged
  against float64 like any other code (tests/numerics.py);
* a persistent compilation cache shared by this process and the `main.py` processes the tests
  start (through the environment): many tests compile the same programs — the single-device
  reference, the same scheme in several processes — and XLA:CPU compiles take seconds each.
  It lives in a fresh temporary directory, so every run starts empty, unless the environment
  names one already (JAX_COMPILATION_CACHE_DIR).
"""

import atexit
import importlib.metadata
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _add_xla_flag(name: str, value: str) -> None:
  """Appends --name=value to XLA_FLAGS unless the environment sets `name` already."""
  if name not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --{name}={value}".strip()


_add_xla_flag("xla_backend_optimization_level", "0")
_add_xla_flag("xla_gpu_autotune_level", "0")
# XLA aborts on a flag it does not know, so only where the jaxlib has it.
if tuple(map(int, importlib.metadata.version("jaxlib").split(".")[:2])) < (0, 11):
  _add_xla_flag("xla_cpu_use_fusion_emitters", "false")

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _cache = tempfile.mkdtemp(prefix="hybrid_parallel_test_compilation_cache_")
  atexit.register(shutil.rmtree, _cache, ignore_errors=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
# Cache every program (JAX's default skips those under 1 s): the `main.py` processes compile the
# same few dozen small programs each (array initialisers, casts), 30-100 ms apiece, and reading
# them back costs little (measured: a repeated tiny run 6.6 s of CPU with 0.1 s, 4.7 s with 0).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# Where tests/paths_test.py notes each cell's outcome, for the table the suite prints at its end
# (tests/conftest.py): one file for every process of the run, as the cache above.
if "PATH_MATRIX_TABLE" not in os.environ:
  os.environ["PATH_MATRIX_TABLE"] = os.path.join(tempfile.mkdtemp(prefix="path_matrix_"),
                                                 "cells.jsonl")
  atexit.register(shutil.rmtree, os.path.dirname(os.environ["PATH_MATRIX_TABLE"]),
                  ignore_errors=True)
PATH_MATRIX_TABLE = os.environ["PATH_MATRIX_TABLE"]

import jax  # noqa: E402  (after the environment the processes it starts inherit)

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))

"""Compiler options for the steps, per platform: what made AlexNet's step faster on XLA:CPU.

Every jitted train and eval step goes through `jit`, which adds the options of the mesh's platform
(none on GPU and TPU). They are per-computation options, so they apply in a notebook whose JAX is
already running, and leave the user's XLA_FLAGS and other programs alone.

CPU (jaxlib 0.10): XLA hands convolutions to YNNPACK by default; on the 2-core x86 machine of
docs/benchmarks.md its kernels for AlexNet's convolutions — the strided 11×11 stem and the weight
gradients above all — ran slower than XLA's own (Eigen) ones: the one-column AlexNet's step at
batch 32, 224² took 744.7 ms with XLA's defaults and 601.5 ms with these options (medians,
benchmarks/pytorch_reference.py). Matrix products stay on YNNPACK. On the narrow `_tiny` test
networks the effect is mixed. `config.tune_xla_cpu = False` keeps XLA's defaults.
"""

import jax

# Only YNNPACK's matmul fusions (XLA's default also sends it every convolution).
CPU_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


def for_mesh(mesh, tuned: bool = True) -> dict[str, str]:
  """The options for a program on `mesh`'s devices (empty when not `tuned`)."""
  if tuned and mesh.devices.flat[0].platform == "cpu":
    return dict(CPU_OPTIONS)
  return {}


def jit(fun, mesh, tuned: bool = True, **jit_kwargs):
  """`jax.jit(fun, **jit_kwargs)` with the options for `mesh`'s platform."""
  return jax.jit(fun, compiler_options=for_mesh(mesh, tuned) or None, **jit_kwargs)

"""Compiler options for every jitted program, per platform.

Every train and eval step goes through `jit`, the one-off initialiser of the state through
`jit_initializer`; both add the options of the mesh's platform. They are per-computation options,
so they apply in a notebook whose JAX is already running, and leave the user's XLA_FLAGS and
other programs alone.

CPU (XLA:CPU, jaxlib 0.10):
  * steps: XLA hands convolutions to YNNPACK by default; on the CPUs measured so far its kernels
    for AlexNet's convolutions (the strided 11×11 stem and the weight gradients above all) ran
    slower than XLA's own Eigen ones, so only matrix products stay on YNNPACK. What that gave is
    in docs/performance.md. `tune_xla_cpu = False` keeps XLA's defaults.
  * the initialiser runs once, but LLVM spends seconds optimising the threefry random-bit
    generation of every parameter's initialiser, for every model and mesh; it is compiled at
    LLVM optimisation level 1, which takes a third to a quarter of the time and gave bitwise the
    same initial values for every registered model (level 0 is faster still, but changes the
    last bit of some values).
GPU and TPU: none (XLA's defaults).
"""

import contextlib

import jax

# Only YNNPACK's matmul fusions (XLA's default also sends it every convolution).
CPU_STEP_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
CPU_INITIALIZER_OPTIONS = {"xla_backend_optimization_level": 1}


def _platform(where) -> str:
  """The platform of a mesh's devices, or of one device."""
  return where.platform if isinstance(where, jax.Device) else where.devices.flat[0].platform


def for_mesh(mesh, *, tuned: bool = True) -> dict[str, str]:
  """The step options for a program on `mesh`'s devices (empty when not `tuned`)."""
  if tuned and _platform(mesh) == "cpu":
    return dict(CPU_STEP_OPTIONS)
  return {}


def jit(fun, mesh, *, tuned: bool = True, outside_mesh: bool = False,
        **jit_kwargs) -> "Program":
  """`jax.jit(fun, **jit_kwargs)` with the step options of `mesh`'s platform, as a `Program`
  (`outside_mesh`: see Program)."""
  return Program(fun, mesh, tuned=tuned, outside_mesh=outside_mesh, **jit_kwargs)


class Program:
  """A jitted step or evaluation: called and lowered like `jax.jit(fun)`, with the compiler
  options of its mesh's platform — and `fed`, the same function with what makes its inputs in
  front of it, compiled as ONE program (XLA takes compiler options on the outermost jit only, so
  the step's own jit nests there without them).

  `outside_mesh`: called and lowered with no mesh set (`jax.set_mesh(None)`): pmap traces its
  function in a shard_map over a one-axis mesh of its own, which JAX refuses to nest in the
  caller's `jax.set_mesh(...)` context (the training loop runs inside one).
  """

  def __init__(self, fun, mesh, *, tuned: bool = True, outside_mesh: bool = False,
               **jit_kwargs):
    self.mesh, self.tuned, self.outside_mesh = mesh, tuned, outside_mesh
    self.name = getattr(fun, "__name__", "program")  # what profiles and logs call it
    self.nested = jax.jit(fun, **jit_kwargs)  # what a program that feeds this one calls
    self.out_shardings = jit_kwargs.get("out_shardings")
    self._jitted = jax.jit(fun, compiler_options=for_mesh(mesh, tuned=tuned) or None,
                           **jit_kwargs)

  def _context(self):
    return jax.set_mesh(None) if self.outside_mesh else contextlib.nullcontext()

  def __call__(self, *args):
    with self._context():
      return self._jitted(*args)

  def lower(self, *args) -> jax.stages.Lowered:
    with self._context():
      return self._jitted.lower(*args)

  def fed(self, make_arguments, *, donate_argnums=()) -> "Program":
    """One program: `make_arguments(*args)` gives this program's arguments, from which it runs.
    The step's input work (gathering rows, converting, augmenting) goes in front of the step
    this way, so that XLA schedules and fuses it with the step instead of running it as
    programs of its own. It returns what this program returns, where this program puts it: a
    step whose outputs would otherwise land elsewhere (pmap's, on pmap's own mesh) would take
    its state back in another layout at the next call, and compile a second program."""
    def fed(*args):
      return self.nested(*make_arguments(*args))

    fed.__name__ = self.name  # the step keeps its name in profiles (jit_train_step)
    placed = {} if self.out_shardings is None else {"out_shardings": self.out_shardings}
    return Program(fed, self.mesh, tuned=self.tuned, outside_mesh=self.outside_mesh,
                   donate_argnums=donate_argnums, **placed)


def jit_initializer(fun, where, **jit_kwargs):
  """`jax.jit(fun, **jit_kwargs)` for a program that runs once on `where` (a mesh or a device):
  little LLVM optimisation on CPU."""
  options = dict(CPU_INITIALIZER_OPTIONS) if _platform(where) == "cpu" else None
  return jax.jit(fun, compiler_options=options, **jit_kwargs)

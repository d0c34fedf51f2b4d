"""Float32 results judged against the same computation in float64, not against a fixed tolerance.

Two float32 computations of the same mathematics — one device, and a scheme that splits its sums
over devices; or two ways of computing one convolution — differ by rounding, and by how much
depends on the CPU: XLA:CPU's vector width (AVX-512, AVX2, SSE4.2) changes the order of every long
sum, and batch norm's division by σ amplifies the difference. A fixed tolerance fitted on one CPU
fails on another. So each float32 result is measured against the float64 evaluation of the same
computation (`models.DTYPES["float64"]`: the same network, initial values and dropout masks, every
value in float64 — exact, as far as float32 can tell), and the result under test must be about as
close to it as the float32 reference is.

The yardstick of a tensor is the reference's largest distance from float64, or `FLOOR_ULPS`
float32 ulps of the tensor's largest magnitude if that is more: a float32 value that went through
more than one rounding is rarely within an ulp of the exact one, and a reference that happens to
be is not the measure of what rounding may do.

The factor, `FACTOR`: two float32 evaluations that add the same terms in different orders have
errors of the same size (one bound, γ_n·Σ|x_i|, covers both), and each comparison is of like with
like: the largest error over a tensor. Measured over every comparison in the suite (2,559: 853
tensors under AVX-512, AVX2 and SSE4.2 code, 2026-11-24), the result under test was at most 2.2×
its yardstick; 8 leaves room for CPUs not seen. A scheme bug is not rounding: a gradient sum that
misses one device's part of one 10-number bias put every parameter of the net 164× to 5.7·10⁶×
its yardstick from float64 (tests/step_test.py keeps that check).
"""

import jax
import numpy as np

FACTOR = 8.0
FLOOR_ULPS = 2


def float32_ulp(values) -> float:
  """One float32 ulp at the largest magnitude of `values`."""
  return float(np.spacing(np.float32(np.max(np.abs(values)))))


def distance(a, b) -> float:
  """The largest elementwise |a − b|, in float64."""
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def assert_as_accurate(got, want, exact, *, factor: float = FACTOR) -> None:
  """Asserts that every leaf of `got` is within `factor` yardsticks of `exact`'s: the distance of
  `want`'s leaf from it, or `FLOOR_ULPS` float32 ulps of its magnitude if that is more.

  Args:
    got: the float32 result under test (a tree of arrays; losses and variables, say).
    want: the float32 reference: the same computation the established way (one device).
    exact: the float64 evaluation of the same computation (same tree structure).
    factor: how many yardsticks the result may be from float64.
  """
  got_leaves = jax.tree.leaves_with_path(got)
  want_leaves, exact_leaves = jax.tree.leaves(want), jax.tree.leaves(exact)
  if not len(got_leaves) == len(want_leaves) == len(exact_leaves):
    raise AssertionError(f"the trees differ: {len(got_leaves)} leaves under test, "
                         f"{len(want_leaves)} in the reference, {len(exact_leaves)} in float64.")
  failures = []
  for (path, g), w, e in zip(got_leaves, want_leaves, exact_leaves):
    if np.shape(g) != np.shape(e) or np.shape(w) != np.shape(e):
      raise AssertionError(f"{jax.tree_util.keystr(path)}: shapes {np.shape(g)}, {np.shape(w)} "
                           f"and {np.shape(e)} differ.")
    yardstick = max(distance(w, e), FLOOR_ULPS * float32_ulp(e))
    if distance(g, e) > factor * yardstick:
      failures.append(f"{jax.tree_util.keystr(path) or 'value'}: {distance(g, e):.3g} from "
                      f"float64, {distance(g, e) / yardstick:.1f}× the yardstick "
                      f"{yardstick:.3g} (the reference is {distance(w, e):.3g} from it; "
                      f"allowed {factor}×)")
  if failures:
    raise AssertionError("not float32 rounding:\n  " + "\n  ".join(failures))

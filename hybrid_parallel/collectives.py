"""All-reduce over mesh axes: the gradient reduction of the synchronous schemes.

`allreduce_sum(x, axes, algorithm)` is what the train step calls for every gradient; `"psum"` is
XLA's own all-reduce. The algorithms of the papers (ring, tree, butterfly, parameter server), built
from `ppermute`, register themselves in `ALGORITHMS`.
"""

import jax

from hybrid_parallel.errors import UserError


def _psum(x, axes: tuple[str, ...]):
  return jax.lax.psum(x, axes)


ALGORITHMS = {"psum": _psum}


def allreduce_sum(x, axes: tuple[str, ...], algorithm: str = "psum"):
  """Sums `x` (an array or pytree) over the mesh `axes`; identity when `axes` is empty."""
  if not axes:
    return x
  if algorithm not in ALGORITHMS:
    raise UserError(f"unknown grad_reduce {algorithm!r}; choose one of {', '.join(ALGORITHMS)}.")
  return ALGORITHMS[algorithm](x, axes)

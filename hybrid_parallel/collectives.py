"""Sum all-reduce over a mesh axis: XLA's `psum` and the papers' algorithms built from `ppermute`.

Call these inside a `jax.shard_map` with `check_vma=False`: the ppermute algorithms leave values
that are equal on every device but that JAX's replication typing cannot prove equal (see
`steps/explicit.py`, which runs the reduction in such a region after the checked gradient
computation).

Algorithms (p devices on the axis, n elements; costs in the α-β model of Thakur, Rabenseifner &
Gropp 2005, with `analysis/costmodel.py` holding the formulas):

  psum              XLA's own all-reduce (whatever the backend chooses).
  ring              reduce-scatter then all-gather around a ring: 2(p−1) messages of n/p each per
                    device. Bandwidth-optimal; any p. (Patarasuk & Yuan 2009; Su, Chen & Morgan's
                    "ring reduce".)
  tree              binomial-tree reduction to device 0, then the reverse tree broadcasts the sum:
                    2⌈lg p⌉ rounds of n each. Any p. (FireCaffe's reduction tree.)
  butterfly         recursive halving (reduce-scatter) then recursive doubling (all-gather),
                    partner = index XOR 2^k: 2 lg p rounds, 2n(p−1)/p per device. p must be a power
                    of two. (Rabenseifner's algorithm; the butterfly of Zhao & Canny 2013.)
  parameter_server  every device sends its whole vector to device 0, which sums and sends the sum
                    back to each in turn: 2(p−1) messages of n, serialised at the root.
                    (DistBelief / Paine et al.'s parameter server, synchronously.)
"""

import functools
import math

import jax
import jax.numpy as jnp

from hybrid_parallel import checks
from hybrid_parallel.errors import UserError


def _ring_perm(p: int, shift: int = 1) -> list[tuple[int, int]]:
  return [(i, (i + shift) % p) for i in range(p)]


def _flatten_padded(x: jax.Array, multiple: int) -> tuple[jax.Array, int]:
  flat = x.reshape(-1)
  pad = (-flat.size) % multiple
  return jnp.pad(flat, (0, pad)), flat.size


def ring(x: jax.Array, axis: str) -> jax.Array:
  """Ring all-reduce: p−1 reduce-scatter steps, then p−1 all-gather steps, each to the next device.

  After reduce-scatter step k, device i holds the partial sum over devices i−k..i of chunk
  (i−k−1) mod p; after p−1 steps it holds the full sum of chunk (i+1) mod p, which the all-gather
  passes on around the ring.
  """
  p = jax.lax.axis_size(axis)
  if p == 1:
    return x
  i = jax.lax.axis_index(axis)
  flat, size = _flatten_padded(x, p)
  chunks = flat.reshape(p, -1)
  perm = _ring_perm(p)
  # Reduce-scatter: send the running sum of chunk (i − k) mod p; add what arrives to chunk
  # (i − k − 1) mod p.
  send = chunks[i % p]
  for k in range(p - 1):
    received = jax.lax.ppermute(send, axis, perm)
    send = chunks[(i - k - 1) % p] + received
  # `send` is now the complete sum of chunk (i + 1) mod p... after the last step it is chunk
  # (i − (p − 1)) mod p = (i + 1) mod p.
  owned_index = (i + 1) % p
  result = jnp.zeros_like(chunks).at[owned_index].set(send)
  # All-gather: pass the newest complete chunk on; device i receives chunk (i − k) mod p at step k.
  for k in range(p - 1):
    send = jax.lax.ppermute(send, axis, perm)
    result = result.at[(i - k) % p].set(send)
  return result.reshape(-1)[:size].reshape(x.shape)


def tree(x: jax.Array, axis: str) -> jax.Array:
  """Binomial-tree reduce to device 0, then broadcast down the same tree (FireCaffe)."""
  p = jax.lax.axis_size(axis)
  if p == 1:
    return x
  i = jax.lax.axis_index(axis)
  rounds = math.ceil(math.log2(p))
  acc = x
  for r in range(rounds):
    d = 1 << r
    # Devices i ≡ d (mod 2d) send their partial sums to i − d; ppermute gives zeros elsewhere.
    perm = [(j, j - d) for j in range(p) if j % (2 * d) == d]
    acc = acc + jax.lax.ppermute(acc, axis, perm)
  for r in reversed(range(rounds)):
    d = 1 << r
    perm = [(j, j + d) for j in range(p) if j % (2 * d) == 0 and j + d < p]
    receivers = jnp.array([(j % (2 * d) == d) for j in range(p)])
    acc = jnp.where(receivers[i], jax.lax.ppermute(acc, axis, perm), acc)
  return acc


def butterfly(x: jax.Array, axis: str) -> jax.Array:
  """Recursive halving then recursive doubling with partner = index XOR 2^k (Rabenseifner)."""
  p = jax.lax.axis_size(axis)
  if p == 1:
    return x
  check_axis_sizes("butterfly", {f"mesh.{axis}": p})
  i = jax.lax.axis_index(axis)
  flat, size = _flatten_padded(x, p)
  distances = [p >> (k + 1) for k in range(int(math.log2(p)))]  # p/2, p/4, ..., 1
  xor_perm = lambda d: [(j, j ^ d) for j in range(p)]
  for d in distances:
    lower, upper = jnp.split(flat, 2)
    upper_half = (i & d) != 0  # this device keeps the upper half at this distance.
    keep, give = jnp.where(upper_half, upper, lower), jnp.where(upper_half, lower, upper)
    flat = keep + jax.lax.ppermute(give, axis, xor_perm(d))
  for d in reversed(distances):
    other = jax.lax.ppermute(flat, axis, xor_perm(d))
    upper_half = (i & d) != 0
    flat = jnp.where(upper_half, jnp.concatenate([other, flat]), jnp.concatenate([flat, other]))
  return flat[:size].reshape(x.shape)


def parameter_server(x: jax.Array, axis: str) -> jax.Array:
  """All vectors to device 0 one at a time; the sum back to each device one at a time."""
  p = jax.lax.axis_size(axis)
  if p == 1:
    return x
  i = jax.lax.axis_index(axis)
  total = x
  for j in range(1, p):
    total = total + jax.lax.ppermute(x, axis, [(j, 0)])  # zeros on every device but the root.
  for j in range(1, p):
    total = jnp.where(i == j, jax.lax.ppermute(total, axis, [(0, j)]), total)
  return total


def varying_over(x: jax.Array, axes: tuple[str, ...]) -> jax.Array:
  """`x` typed as varying over every one of the mesh `axes`.

  Under shard_map's varying-axes typing a collective may name only axes its operand varies over
  (JAX 0.11 and later reject the others; 0.10 let them through). A value that is already equal
  over some of `axes` — a gradient summed over "data", a flag computed from it — is cast to
  varying there first: nothing moves, and the collective then reads the same over all of them.
  In a region without the typing (`check_vma=False`) every value counts as invariant and the cast
  is free.
  """
  missing = tuple(a for a in axes if a not in jax.typeof(x).manual_axis_type.varying)
  return jax.lax.pcast(x, missing, to="varying") if missing else x


def all_agree(flag: jax.Array, axes: tuple[str, ...]) -> jax.Array:
  """Whether boolean `flag` holds on every device of the mesh `axes` (one `pmin`), whatever axes
  it already varies over."""
  return jax.lax.pmin(varying_over(flag.astype(jnp.int32), axes), axes) > 0


def _psum(x: jax.Array, axis) -> jax.Array:
  return jax.lax.psum(x, axis)


ALGORITHMS = {"psum": _psum, "ring": ring, "tree": tree, "butterfly": butterfly,
              "parameter_server": parameter_server}


def check_axis_sizes(algorithm: str, sizes: dict[str, int]) -> None:
  """One UserError where `algorithm` cannot sum over an axis of these sizes ({name: size}):
  the butterfly pairs devices by index XOR 2^k, so it needs powers of two."""
  for name, size in sizes.items():
    if algorithm == "butterfly" and size & (size - 1):
      raise UserError(f"grad_reduce 'butterfly' needs power-of-two mesh axes, but {name} is "
                      f"{size}; use ring or tree.")


def allreduce_sum(tree_, axes: tuple[str, ...], algorithm: str = "psum"):
  """Sums every leaf of `tree_` over the mesh `axes` with `algorithm`.

  psum reduces over all `axes` in one all-reduce; the ppermute algorithms run over one axis after
  the other (a sum over "data" then over "model" is the sum over both).
  """
  checks.one_of(ALGORITHMS)("grad_reduce", algorithm)
  if algorithm == "psum":
    return jax.tree.map(lambda x: jax.lax.psum(x, axes), tree_) if axes else tree_
  fn = ALGORITHMS[algorithm]
  for axis in axes:
    tree_ = jax.tree.map(functools.partial(fn, axis=axis), tree_)
  return tree_

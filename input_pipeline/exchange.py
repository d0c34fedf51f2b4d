"""The rows of a training set split over the mesh's "data" axis, sent to the devices whose batch
holds them: each device receives its own rows only.

Device d of the `data` axis holds rows [d·R, (d+1)·R) of the set (R = `rows_per_device`); the
global batch's positions [j·b, (j+1)·b) belong to data shard j (b = B / D, the batch split in
mesh order). A row held by device i and wanted by shard j travels from i to j, and nowhere else:

  on the host (`plan`), which knows each step's rows: every position's row, and its rank among
      the batch's rows going from the same holder to the same shard — so every (holder, shard)
      pair's rows have their places in a message of `capacity` rows, in rounds of as many;
  on the devices (`exchange`), per round: each device gathers the rows it sends into D messages
      of `capacity` rows (its own shard's message included), one all-to-all over "data" delivers
      them, and each device takes its positions' rows from what it received.

The messages have a fixed size, `capacity` rows, so the program is compiled once; the rows a
pair exchanges vary from step to step (a batch's rows are a uniform draw: the count of one pair
is binomial, mean b/D), and the rare step where a pair has more than `capacity` runs a second
round. `capacity` is the mean plus three standard deviations: a device then sends and receives
D·capacity rows a round — at b = 256 on 8 devices, 392 rows for its 256, of which (D−1)/D cross
a link — where a reduce-scatter of the whole batch would send it (D−1)·b.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

DATA = "data"


def capacity(global_batch: int, data: int) -> int:
  """Rows a (holder, shard) pair's message holds: the mean count b/D plus three standard
  deviations √(b/D) (a pair's count is binomial, b draws at 1/D each; the variance b/D·(1−1/D)
  is bounded by b/D), and never more than b, a shard's whole batch."""
  per_shard = global_batch // data
  mean = per_shard / data
  return max(1, min(per_shard, math.ceil(mean + 3 * math.sqrt(mean))))


def plan(rows_B: np.ndarray, *, rows_per_device: int, data: int,
         capacity: int) -> np.ndarray:
  """(B, 3) int32: each position's row, round and place in its (holder, shard) message."""
  batch = len(rows_B)
  holder = rows_B // rows_per_device
  shard = np.arange(batch) // (batch // data)
  pair = holder * data + shard
  order = np.argsort(pair, kind="stable")  # positions grouped by pair, in position order
  sorted_pairs = pair[order]
  first_of_pair = np.searchsorted(sorted_pairs, sorted_pairs, side="left")
  rank = np.empty(batch, np.int64)
  rank[order] = np.arange(batch) - first_of_pair
  return np.stack([rows_B, rank // capacity, rank % capacity], axis=1).astype(np.int32)


def rounds(plan_B3: np.ndarray) -> int:
  """The all-to-all rounds a step's plan takes."""
  return int(plan_B3[:, 1].max()) + 1


def exchange(held, plan_B3, *, mesh, rows_per_device: int, capacity: int):
  """The batch's rows (B × bytes, laid out over "data" as the batch) from `held`, the set split
  over "data" (each device its R rows), by `plan_B3` (`plan`'s, whole on every device)."""
  data = mesh.shape[DATA]

  def per_device(held_R, plan_B3):
    me = jax.lax.axis_index(DATA)
    batch = plan_B3.shape[0]
    per_shard = batch // data
    row, round_, place = plan_B3[:, 0], plan_B3[:, 1], plan_B3[:, 2]
    holder, shard = row // rows_per_device, jnp.arange(batch) // per_shard
    mine = jax.lax.dynamic_slice_in_dim(plan_B3, me * per_shard, per_shard)
    mine_holder = mine[:, 0] // rows_per_device

    def one_round(r, received_rows):
      # The rows this device sends this round, each at its place in its shard's message; the
      # other slots carry row 0 and are never read.
      sending = (holder == me) & (round_ == r)
      slot = jnp.where(sending, shard * capacity + place, data * capacity)
      local = jnp.zeros(data * capacity, jnp.int32).at[slot].set(row - me * rows_per_device,
                                                                 mode="drop")
      arrived = jax.lax.all_to_all(held_R[local], DATA, 0, 0, tiled=True)
      taken = arrived[mine_holder * capacity + mine[:, 2]]
      return jnp.where((mine[:, 1] == r)[:, None], taken, received_rows)

    empty = jnp.zeros((per_shard, held_R.shape[1]), held_R.dtype)
    return jax.lax.fori_loop(0, jnp.max(round_) + 1, one_round, empty)

  return jax.shard_map(per_device, mesh=mesh, in_specs=(PartitionSpec(DATA), PartitionSpec()),
                       out_specs=PartitionSpec(DATA), check_vma=False)(held, plan_B3)

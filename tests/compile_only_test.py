"""benchmarks/common/compile_only.py's search for the largest batch that fits, the logic that
tpu_compile and gpu_compile --largest_batch share: driven here by a program whose memory grows
with the batch as a step's does (a fixed share plus a share per image), so that the answer is
known without compiling for a TPU or GPU."""

from absl.testing import absltest

from benchmarks.common import compile_only

GIB = 2**30
CAPACITY = 10 * GIB


def program_row(batch: int) -> dict:
  """A compiled step of `batch` images: 0.5 GiB of parameters and 1 GiB per 1024 images, so the
  largest power of two within CAPACITY is 8192 (8.5 GiB; 16384 needs 16.5)."""
  gib = 0.5 + batch / 1024
  return {"global_batch": batch, "compiled": True, "hbm_gib": gib,
          "hbm_fits": gib * GIB <= CAPACITY}


class LargestBatchTest(absltest.TestCase):

  def test_both_configs_reach_the_largest_power_of_two_that_fits(self):
    compiled = []

    def compile_batch(name, batch):
      compiled.append((name, batch))
      return program_row(batch)

    # single's earlier row (256 images, 0.75 GiB: 3 MiB an image, the fixed share counted as if
    # it grew) scales to a first guess of 2048; owt8 has none and starts at its own 1024.
    known = [{"config": "single", "dtype": "bfloat16", **program_row(256)}]
    rows = compile_only.largest_batches(compile_batch, known=known, capacity_bytes=CAPACITY)
    self.assertEqual([(r["config"], r["largest_global_batch"], r["hbm_gib"], r["next_batch"],
                       r["next"]) for r in rows],
                     [("single", 8192, 8.5, 16384, "16.5 GiB"),
                      ("owt8", 8192, 8.5, 16384, "16.5 GiB")])
    self.assertEqual(compiled, [("single", 2048), ("single", 4096), ("single", 8192),
                                ("single", 16384),
                                ("owt8", 1024), ("owt8", 2048), ("owt8", 4096), ("owt8", 8192),
                                ("owt8", 16384)])
    self.assertEqual([r["compiles"] for r in rows], [4, 5])

  def test_a_first_guess_too_large_is_halved_until_it_fits(self):
    result = compile_only.largest_batch(lambda batch: (program_row(batch),
                                                       program_row(batch)["hbm_fits"]), 65536)
    self.assertEqual((result["largest_global_batch"], result["next_batch"], result["compiles"]),
                     (8192, 16384, 4))

  def test_a_refusal_that_is_not_memory_ends_the_search_with_its_reason(self):
    refused = {"global_batch": 256, "compiled": False,
               "reason": "the mesh needs 8 devices; the topology has 4"}
    result = compile_only.largest_batch(lambda batch: (refused, False), 256)
    self.assertEqual(result, {"largest_global_batch": None, "hbm_gib": None, "next_batch": 256,
                              "next": refused["reason"], "compiles": 1})


if __name__ == "__main__":
  absltest.main()

"""The device time per operation read back from a real `jax.profiler` trace."""

import tempfile

import jax
import jax.numpy as jnp
from absl.testing import absltest

from hybrid_parallel.analysis import trace_stats


class TraceStatsTest(absltest.TestCase):

  def test_top_ops_are_the_programs_operations(self):
    @jax.jit
    def program(x):
      return jnp.tanh(x @ x) @ x

    x = jnp.ones((512, 512))
    hlo = program.lower(x).compile().as_text()
    program(x).block_until_ready()  # compiled before the trace.
    with tempfile.TemporaryDirectory() as directory:
      jax.profiler.start_trace(directory)
      for _ in range(3):
        program(x).block_until_ready()
      jax.profiler.stop_trace()
      ops = trace_stats.top_ops(directory, steps=3)
    self.assertNotEmpty(ops)
    for op in ops:  # each is an instruction of the compiled program, run once per step.
      self.assertIn(f"%{op['op']} = ", hlo)
      self.assertEqual(op["calls"], 3)
    self.assertAlmostEqual(sum(op["share"] for op in ops), 1.0, places=3)
    self.assertEqual([op["ms_per_step"] for op in ops],
                     sorted((op["ms_per_step"] for op in ops), reverse=True))

  def test_no_trace_is_one_clear_error(self):
    with tempfile.TemporaryDirectory() as directory:
      with self.assertRaisesRegex(FileNotFoundError, "no \\*.trace.json.gz under"):
        trace_stats.top_ops(directory, steps=1)


if __name__ == "__main__":
  absltest.main()

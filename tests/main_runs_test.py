"""benchmarks/common/main_runs.py: which of a main.py run's log windows its median rate reads."""

from absl.testing import absltest

from benchmarks.common import main_runs


def windows(*ends):
  """metrics.jsonl's train rows of windows ending at `ends`, the rate of each its end (to tell
  them apart)."""
  return [{"step": end, "train_loss": 1.0, "images_per_sec": float(end)} for end in ends]


class UntracedRatesTest(absltest.TestCase):

  def test_the_first_window_and_every_window_holding_a_traced_step_are_left_out(self):
    rows = windows(50, 100, 150, 200)
    # The first window holds the compile (step 1); traced steps are 2 … profile_steps + 1.
    self.assertEqual(main_runs.untraced_rates(rows, profile_steps=0), [100.0, 150.0, 200.0])
    self.assertEqual(main_runs.untraced_rates(rows, profile_steps=49), [100.0, 150.0, 200.0])
    self.assertEqual(main_runs.untraced_rates(rows, profile_steps=50), [150.0, 200.0])
    # 8 steps logged every 2 with steps 2-5 traced: the last window only.
    self.assertEqual(main_runs.untraced_rates(windows(2, 4, 6, 8), profile_steps=4), [8.0])


if __name__ == "__main__":
  absltest.main()

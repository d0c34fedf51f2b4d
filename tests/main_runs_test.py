"""benchmarks/common/main_runs.py: a main.py run's progress streamed as it trains, and which of
its log windows its median rate reads."""

import contextlib
import io
import os
import re
import tempfile

from absl.testing import absltest

from benchmarks.common import main_runs
from tests.main_test import said_in_order


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


class Console(io.StringIO):
  """A stderr that notes, when the run's compile line arrives, how many rows the run had written
  to metrics.jsonl by then: none while it streams, all of them if its lines came at its end."""

  def __init__(self, metrics_path: str):
    super().__init__()
    self.metrics_path, self.rows_at_compile = metrics_path, None

  def write(self, text: str) -> int:
    if "compiling the step" in text:
      exists = os.path.exists(self.metrics_path)
      self.rows_at_compile = len(open(self.metrics_path).readlines()) if exists else 0
    return super().write(text)


class RunConfigTest(absltest.TestCase):

  def test_a_runs_progress_streams_as_it_trains_named_by_the_run(self):
    with tempfile.TemporaryDirectory() as workdirs:
      console = Console(os.path.join(workdirs, "tiny", "metrics.jsonl"))
      with contextlib.redirect_stderr(console):
        result = main_runs.run_config(
            "single", workdirs, run_name="tiny",
            # A batch of 16 (single.py's is 256): how the progress streams does not depend on it.
            overrides=("--config.model=alexnet_tiny", "--config.image_size=64",
                       "--config.global_batch_size=16", "--config.num_train_steps=4",
                       "--config.log_every_steps=2"))
    said_in_order(self, console.getvalue(),
                  "^" + re.escape("tiny | compiling the step for the 1×1 mesh (single) …") + "$",
                  r"^tiny \| compiled in \d+\.\d s; the first step ran in \d+\.\d\d s\.$",
                  r"^tiny \| step 2/4 \| loss [\d.]+ \| .* \| ETA \d+m\d\ds$",
                  r"^tiny \| step 4/4 \| loss ")
    self.assertEqual(console.rows_at_compile, 0)  # said while it ran, not after.
    self.assertEqual((result["steps"], result["config"]), (4, "single"))


if __name__ == "__main__":
  absltest.main()

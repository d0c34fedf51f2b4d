"""hybrid_parallel/metric_writers.py: what a library's logging leaves on the console."""

import io
import logging
import os
import sys
import tempfile

from absl.testing import absltest

from tensorboard.backend.event_processing import event_accumulator

from hybrid_parallel import metric_writers


def _raised(error: Exception):
  try:
    raise error
  except Exception:  # noqa: BLE001 — the exc_info a logged record carries.
    return sys.exc_info()


class QuietInfoFromTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.console = io.StringIO()
    handler = logging.StreamHandler(self.console)
    logging.root.addHandler(handler)
    self.addCleanup(logging.root.removeHandler, handler)
    metric_writers.quiet_info_from("orbax")  # filters the root's handlers, this one included.

  def test_asyncio_s_unretrieved_task_error_of_the_library_is_one_line(self):
    # As a full disk left it (faults_test: a save that fails): orbax's other fragment writes'
    # errors, collected unread, reported by asyncio with their traceback — a "Traceback" beside
    # the one-sentence report, on some runs only (when the tasks are collected).
    task = (f"future: <Task finished coro=<write_fragment() done, defined at "
            f"{os.sep}site-packages{os.sep}orbax{os.sep}checkpoint{os.sep}serialization.py:188>>")
    logging.getLogger("asyncio").error("Task exception was never retrieved\n%s", task,
                                       exc_info=_raised(ValueError("File too large")))
    self.assertEqual(self.console.getvalue(), "Task exception was never retrieved\n")

  def test_other_tasks_keep_their_traceback(self):
    logging.getLogger("asyncio").error("Task exception was never retrieved\nfuture: <Task "
                                       "defined at /app/mine.py:1>",
                                       exc_info=_raised(ValueError("mine")))
    self.assertIn("Traceback (most recent call last)", self.console.getvalue())
    self.assertIn("ValueError: mine", self.console.getvalue())


class MetricWriterTest(absltest.TestCase):

  def test_each_row_is_in_both_records_when_write_returns(self):
    # Read back after every write, the writer still open: a row a SIGKILL interrupts after
    # write() returned is on disk in both. (tensorboardX's SummaryWriter failed this: its events
    # wait in a queue for a thread, which its flush() does not wait for.)
    with tempfile.TemporaryDirectory() as workdir:
      writer = metric_writers.MetricWriter(workdir)
      for step in range(1, 41):
        writer.write(step, {"train_loss": 1.0 / step})
        events = event_accumulator.EventAccumulator(workdir)
        events.Reload()
        self.assertEqual([e.step for e in events.Scalars("train_loss")][-1], step)
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
          self.assertEqual(len(f.readlines()), step)
      writer.close()

  def test_a_resumed_run_hides_what_its_predecessor_logged_after_the_checkpoint(self):
    with tempfile.TemporaryDirectory() as workdir:
      first = metric_writers.MetricWriter(workdir)
      for step in (2, 4, 6):
        first.write(step, {"train_loss": float(step)})
      first.close()
      resumed = metric_writers.MetricWriter(workdir, first_step=4)  # its checkpoint: step 4.
      resumed.write(6, {"train_loss": 60.0})
      resumed.close()
      events = event_accumulator.EventAccumulator(workdir)
      events.Reload()
      self.assertEqual([(e.step, e.value) for e in events.Scalars("train_loss")],
                       [(2, 2.0), (4, 4.0), (6, 60.0)])


if __name__ == "__main__":
  absltest.main()

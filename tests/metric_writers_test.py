"""hybrid_parallel/metric_writers.py: what a library's logging leaves on the console."""

import io
import logging
import os
import sys

from absl.testing import absltest

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


if __name__ == "__main__":
  absltest.main()

"""Loaded by pytest before it starts any test process. Importing it imports tests/__init__.py here
too, so under pytest-xdist (`-n 2`) the controlling process creates the compilation cache
directory and puts it in the environment before the workers start: both workers and every
`main.py` they run share one cache, and a program compiled by one is read by the others."""

import json
import os

import pytest

from tests import PATH_MATRIX_TABLE

# The scopes pytest-xdist's loadscope hands out whole (a test class, or a module's test
# functions) that take longest, longest first: started first, they run beside the many short
# ones instead of after them, so that neither worker waits long at the end. (xdist's own order,
# most tests first, put the longest, which hold one to three tests, last.) Measured with
# `pytest --stage-times` on a 2-core AMD EPYC (those of 15 s or more, by their mean wall time
# under Python 3.11 / JAX 0.10 and 3.13 / JAX 0.12); conventions_test holds each name to a class.
LONGEST_FIRST = (
    "tests/step_test.py::EquivalenceTest",
    "tests/paths_test.py::DecodedSourcesTest",
    "tests/faults_test.py::MultiProcessTest",
    "tests/accelerator_test.py::MeasureGpuScriptTest",
    "tests/asgd_test.py::AsgdTest",
    "tests/paths_test.py::InMemorySourcesTest",
    "tests/paths_test.py::PreparedSourcesTest",
    "tests/accelerator_test.py::DryRunTest",
    "tests/paths_test.py::DigitsTest",
    "tests/costmodel_test.py::CompiledTrafficTest",
    "tests/docs_test.py::BenchmarksTest",
    "tests/asgd_test.py::StepTimesTest",
    "tests/models_test.py::TorchvisionParityTest",
    "tests/faults_test.py::PreemptionTest",
    "tests/checkpoint_test.py::ResumeTest",
    "tests/tfds_input_test.py::EndToEndTest",
    "tests/decoded_input_test.py::CompileOnceTest",
    "tests/variable_batch_test.py::VariantsTest",
    "tests/backend_test.py::GspmdTest",
    "tests/models_test.py::ModelsTest",
    "tests/notebook_test.py::NotebookTest",
    "tests/train_test.py::TrainTest",
    "tests/backend_test.py::PmapTest",
    "tests/decoded_input_test.py::DecodedTest",
    "tests/averaging_test.py::AveragingTest",
)


def pytest_addoption(parser):
  parser.addoption("--stage-times", action="store_true",
                   help="After the run, where the tests' seconds went, by test class (or "
                        "module): JAX's tracing, lowering and compiles, the processes the tests "
                        "started (tests/stage_times.py).")
  parser.addoption("--stage-times-json", metavar="PATH",
                   help="--stage-times, and each test phase's row written to PATH (JSON lines).")


def pytest_configure(config):
  """Keeps the order below under loadscope (xdist's reorder by test count would undo it).
  With --stage-times: a clock in each process that runs tests, the totals in the one that
  reports (xdist's controller, or the one process)."""
  global _clock, _totals, _pending
  if getattr(config.option, "dist", "no") == "loadscope":
    config.option.loadscopereorder = False
  if config.getoption("stage_times") or config.getoption("stage_times_json"):
    from tests import stage_times  # imports train (and JAX's users) only when asked for
    worker = hasattr(config, "workerinput")
    controller = not worker and config.getoption("numprocesses", None)
    _clock = None if controller else stage_times.Clock()
    _totals = None if worker else stage_times.Totals()
    _pending = []


_clock = _totals = _pending = None  # --stage-times' (tests/stage_times.py)


def pytest_runtest_logstart():
  """A test's seconds start here; those since the last test go with its first report."""
  if _clock is not None:
    _pending.append(_clock.lap())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport():
  """Each phase's seconds go with its report (to xdist's controller, where one runs)."""
  outcome = yield
  if _clock is not None:
    from tests import stage_times
    properties = outcome.get_result().user_properties
    properties.extend((stage_times.BETWEEN, row) for row in _pending)
    _pending.clear()
    properties.append((stage_times.KEY, _clock.lap()))


def pytest_runtest_logreport(report):
  if _totals is not None:
    _totals.add(report)


def scope(nodeid: str) -> str:
  """The unit loadscope hands a worker: a test's class, or its module (xdist's own split)."""
  return nodeid.rsplit("::", 1)[0]


def pytest_collection_modifyitems(items):
  """LONGEST_FIRST's scopes first, in its order; the rest as collected (a stable sort)."""
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(scope(item.nodeid), len(rank)))


def pytest_terminal_summary(terminalreporter):
  """--stage-times' table; the path matrix's table (tests/paths_test.py), cell by cell, from
  whichever processes ran its cells."""
  if _totals is not None:
    terminalreporter.section("stage times: where the seconds went")
    for line in _totals.lines(scope):
      terminalreporter.write_line(line)
    if terminalreporter.config.getoption("stage_times_json"):
      _totals.write_json(terminalreporter.config.getoption("stage_times_json"))
  if not os.path.exists(PATH_MATRIX_TABLE):
    return
  with open(PATH_MATRIX_TABLE) as f:
    outcomes = {tuple(row["cell"]): row["outcome"] for row in map(json.loads, f)}
  terminalreporter.section("path matrix: scheme × backend × source × processes")
  terminalreporter.write_line("| scheme | backend | source | processes | outcome |")
  terminalreporter.write_line("|---|---|---|---|---|")
  for cell, outcome in outcomes.items():
    terminalreporter.write_line(f"| {' | '.join(map(str, cell))} | {outcome} |")

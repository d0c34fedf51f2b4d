"""Loaded by pytest before it starts any test process. Importing it imports tests/__init__.py here
too, so under pytest-xdist (`-n 2`) the controlling process creates the compilation cache
directory and puts it in the environment before the workers start: both workers and every
`main.py` they run share one cache, and a program compiled by one is read by the others."""

import json
import os

from tests import PATH_MATRIX_TABLE

# The scopes pytest-xdist's loadscope hands out whole (a test class, or a module's test
# functions) that take longest, longest first: started first, they run beside the many short
# ones instead of after them, so that neither worker waits long at the end. (xdist's own order,
# most tests first, put the longest, which hold one to three tests, last.) Measured with
# `pytest --durations` on a quiet 2-core AMD EPYC; conventions_test holds each name to a class.
LONGEST_FIRST = (
    "tests/paths_test.py::DecodedSourcesTest",
    "tests/step_test.py::EquivalenceTest",
    "tests/faults_test.py::MultiProcessTest",
    "tests/accelerator_test.py::MeasureGpuScriptTest",
    "tests/paths_test.py::InMemorySourcesTest",
    "tests/paths_test.py::PreparedSourcesTest",
    "tests/models_test.py::TorchvisionParityTest",
    "tests/asgd_test.py::AsgdTest",
    "tests/paths_test.py::DigitsTest",
    "tests/faults_test.py::PreemptionTest",
    "tests/accelerator_test.py::DryRunTest",
    "tests/tfds_input_test.py::EndToEndTest",
    "tests/decoded_input_test.py::CompileOnceTest",
    "tests/checkpoint_test.py::ResumeTest",
    "tests/notebook_test.py::NotebookTest",
)


def pytest_configure(config):
  """Keeps the order below under loadscope (xdist's reorder by test count would undo it)."""
  if getattr(config.option, "dist", "no") == "loadscope":
    config.option.loadscopereorder = False


def scope(nodeid: str) -> str:
  """The unit loadscope hands a worker: a test's class, or its module (xdist's own split)."""
  return nodeid.rsplit("::", 1)[0]


def pytest_collection_modifyitems(items):
  """LONGEST_FIRST's scopes first, in its order; the rest as collected (a stable sort)."""
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(scope(item.nodeid), len(rank)))


def pytest_terminal_summary(terminalreporter):
  """The path matrix's table (tests/paths_test.py), cell by cell, from whichever processes ran
  its cells."""
  if not os.path.exists(PATH_MATRIX_TABLE):
    return
  with open(PATH_MATRIX_TABLE) as f:
    outcomes = {tuple(row["cell"]): row["outcome"] for row in map(json.loads, f)}
  terminalreporter.section("path matrix: scheme × backend × source × processes")
  terminalreporter.write_line("| scheme | backend | source | processes | outcome |")
  terminalreporter.write_line("|---|---|---|---|---|")
  for cell, outcome in outcomes.items():
    terminalreporter.write_line(f"| {' | '.join(map(str, cell))} | {outcome} |")

"""Loaded by pytest before it starts any test process. Importing it imports tests/__init__.py here
too, so under pytest-xdist (`-n 2`) the controlling process creates the compilation cache
directory and puts it in the environment before the workers start: both workers and every
`main.py` they run share one cache, and a program compiled by one is read by the others."""

import json
import os

from tests import PATH_MATRIX_TABLE


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

"""Benchmarks and studies, grouped by the question each answers (benchmarks/README.md maps each
question to its command, its JSON and its doc page). Each runs from the repository root as
`python -m benchmarks.GROUP.NAME` (`--help` lists its flags), prints JSON and writes its results
into docs/, where `python -m benchmarks.docs` renders the tables each study declares (`TABLES`).

What every study shares is here, in the package: where the docs are, how a result is published,
and how a table is declared (one row per item of the JSON, as its columns)."""

import json
import os
import re
import sys
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


def publish(data, path: str) -> None:
  """Writes a study's JSON to `path`; when that is docs/, refreshes the tables made from it."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
  if os.path.dirname(os.path.abspath(path)) == DOCS:
    from benchmarks import docs  # the pages import every study: only when they are rewritten.
    rewritten = docs.update_docs()
    print(f"wrote {os.path.relpath(path, ROOT)}; refreshed its tables in "
          f"{', '.join(rewritten) or 'no page (unchanged)'}", file=sys.stderr)


def load_if_present(path: str, default=()):
  """The JSON at `path`, or `default` (a list) when there is none yet."""
  if not os.path.exists(path):
    return list(default)
  with open(path) as f:
    return json.load(f)


def without_machine_paths(value):
  """`value` (a report) with the paths of the machine it ran on taken out of its tracebacks:
  files of this repository relative to its root, installed packages from `site-packages/` on
  (the report goes into docs/)."""
  if isinstance(value, dict):
    return {k: without_machine_paths(v) for k, v in value.items()}
  if isinstance(value, list):
    return [without_machine_paths(v) for v in value]
  if isinstance(value, str):
    return re.sub(r"/[^\s\"']*/site-packages/", "site-packages/",
                  value.replace(ROOT + os.sep, ""))
  return value


# --- Markdown tables, declared as data -----------------------------------------------------------

def row(cells) -> str:
  """A Markdown table row; an empty cell is "| |"."""
  return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def table(columns, rows) -> str:
  """A Markdown table: the header `columns`, then each of `rows` (a sequence of cells)."""
  return "\n".join([row(columns), "|---" * len(columns) + "|", *map(row, rows)])


def per_row(*columns, rows=lambda data: data):
  """A table of one row per item of `rows(data)`, declared as its columns: (header, cell), the
  cell a format string over the item's keys ("{config}", "{mesh[0]}×{mesh[1]}") or a function
  of the item."""
  def render(data) -> str:
    return table([header for header, _ in columns],
                  ([cell(r) if callable(cell) else cell.format_map(r) for _, cell in columns]
                   for r in rows(data)))
  return render


def mb(x: float) -> str:
  return f"{x / 1e6:.1f}"


def percent(x: float) -> str:
  return f"{100 * x:.2f}%"


def spread(key: str) -> Callable[[dict], str]:
  """The cell "median (p10–p90)" of the timing `key`."""
  return lambda r: "{median} ({p10}–{p90})".format_map(r[key])

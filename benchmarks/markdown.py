"""Markdown tables for the docs, declared as data: a table is its columns (header, cell), one row
per item of the JSON a benchmark wrote (benchmarks/tables.py renders them into the pages)."""

from collections.abc import Callable


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

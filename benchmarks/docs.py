r"""The docs' tables and figures, rendered from the JSON the studies wrote: never copied by hand.

  python -m benchmarks.docs            # rewrite every table and figure in docs/*.md and README.md
  python -m benchmarks.docs --check    # exit 1 if one differs from its JSON

A page includes a table as a block

  <!-- table: NAME -->
  ...
  <!-- end table -->

whose body is `render(NAME)`: the function declared for NAME in the `TABLES` of its group's
tables module (name → (function, the JSON file(s) in docs/ it reads; several are passed as a
list)), applied to that JSON's results (or, for a function marked `with_record`, to its (record,
results)). Each study refreshes the blocks after writing its JSON
(benchmarks.publish), and tests/docs_test.py fails when a block and its JSON disagree.

A page says where a table's figures come from with a block

  <!-- record: FILE -->
  ...
  <!-- end record -->

whose body is `record_line(FILE)`: the date, machine and command of docs/FILE's record.

A figure quoted in a sentence is a span

  <!-- figure: NAME -->...<!-- end -->

whose text is `render_figure(NAME)`: the function declared for NAME in `benchmarks.figures.FIGURES`
applied to its JSON. README.md and the guides quote every measured figure so.
"""

import marshal
import os
import re
import sys

from benchmarks import DOCS, ROOT, figures, load_results
from benchmarks.choosing import tables as choosing
from benchmarks.communication import tables as communication
from benchmarks.papers import tables as papers
from benchmarks.reliability import tables as reliability
from benchmarks.speed import accelerator_tables
from benchmarks.speed import tables as speed

# Every table: name → (its function, the JSON file or files it is made from), as each group of
# studies declares them beside its studies (benchmarks/README.md says which question each group
# answers; the tables modules define no flags, so the pages can import them all).
SOURCES = {**choosing.TABLES, **communication.TABLES, **papers.TABLES, **reliability.TABLES,
           **speed.TABLES, **accelerator_tables.TABLES}


_BLOCK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end table -->)",
                    re.DOTALL)
_RECORD = re.compile(r"(<!-- record: (?P<file>[\w.-]+\.json) -->\n)(?P<indent> *)(?P<body>.*?)"
                     r"( *<!-- end record -->)", re.DOTALL)
# A figure's span stays on one line: it sits inside a sentence.
FIGURE = re.compile(r"(<!-- figure: (?P<name>[\w.-]+) -->)(?P<body>[^\n]*?)(<!-- end -->)")


# path → ((its mtime, its size), marshal's bytes of its (record, results)).
_PARSED: dict[str, tuple[tuple[int, int], bytes]] = {}


def _load_results(path: str) -> tuple[dict, object]:
  """benchmarks.load_results, each version of a file parsed once (asynchronous.json is 4 MB, and
  dozens of tables and figures read it: parsing it for each was most of a refresh), each call
  handed a copy of its own (marshal's copy takes a third of a parse), so that no table or figure
  sees what another did to the rows it was given."""
  stat = os.stat(path)
  version = (stat.st_mtime_ns, stat.st_size)
  if path not in _PARSED or _PARSED[path][0] != version:
    _PARSED[path] = (version, marshal.dumps(load_results(path)))
  return marshal.loads(_PARSED[path][1])


def _load(path: str):
  return _load_results(path)[1]


def record_line(file: str, docs: str = DOCS) -> str:
  """The line `Measured DATE on MACHINE: COMMAND (FILE).` from the record of docs/FILE (each
  command of a file merged from several runs in its own code span)."""
  record, _ = _load_results(os.path.join(docs, file))
  commands = "; ".join(f"`{command}`" for command in record["command"].split("; "))
  machine = ("a machine not recorded" if record["machine"] == "unrecorded" else
             record["machine"])
  return f"Measured {record['date']} on {machine}: {commands} ({file})."


def _files(name: str) -> tuple[str, ...]:
  files = SOURCES[name][1]
  return files if isinstance(files, tuple) else (files,)


def _rendered(name: str, docs: str) -> str:
  """render(name), or "" where a JSON it is made from is not in `docs`."""
  if not all(os.path.exists(os.path.join(docs, f)) for f in _files(name)):
    return ""
  return render(name, docs)


def measured(name: str, docs: str = DOCS) -> bool:
  """Whether the JSON table `name` is made from is in `docs` and holds rows for it (one JSON can
  feed several tables, e.g. the large-batch sweep and its tuning grid)."""
  return bool(_rendered(name, docs))


def render(name: str, docs: str = DOCS) -> str:
  """The Markdown of table `name` from its JSON in `docs` (its results; (record, results) for a
  function marked `with_record`, whose table names where and when its rows were measured)."""
  function, files = SOURCES[name]
  load = _load_results if getattr(function, "with_record", False) else _load
  if isinstance(files, tuple):
    return function([load(os.path.join(docs, f)) for f in files])
  return function(load(os.path.join(docs, files)))


def render_figure(name: str, docs: str = DOCS) -> str:
  """The text of figure `name` from its JSON in `docs` (its results, or its record)."""
  function, file = figures.FIGURES[name]
  record, results = _load_results(os.path.join(docs, file))
  return function(record if getattr(function, "of_record", False) else results)


def pages(root: str = ROOT) -> list[str]:
  """The Markdown pages that may include tables: README.md and docs/*.md."""
  docs = os.path.join(root, "docs")
  return [os.path.join(root, "README.md")] + sorted(
      os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def refresh(text: str, docs: str = DOCS) -> str:
  """`text` with every table block's body rendered anew from its JSON (a block whose JSON is not
  there yet is left as it is), every record block's from its JSON's record, and every figure from
  its JSON (a figure of no declared name is an error)."""

  def block(m):
    body = _rendered(m.group("name"), docs)  # rendered once: its JSON may be megabytes.
    return m.group(1) + body + "\n" + m.group(4) if body else m.group(0)

  def record_block(m):
    return (m.group(1) + m.group("indent") + record_line(m.group("file"), docs) + "\n" +
            m.group(5))

  def figure(m):
    if m.group("name") not in figures.FIGURES:
      raise KeyError(f"no figure named {m.group('name')} in benchmarks/figures.py")
    return m.group(1) + render_figure(m.group("name"), docs) + m.group(4)

  return FIGURE.sub(figure, _RECORD.sub(record_block, _BLOCK.sub(block, text)))


def update_docs(root: str = ROOT, *, check: bool = False) -> list[str]:
  """Rewrites the table blocks of every page (or, with `check`, only reports them).

  Returns:
    The pages whose blocks differed from their JSON.
  """
  stale = []
  for page in pages(root):
    with open(page) as f:
      text = f.read()
    fresh = refresh(text, os.path.join(root, "docs"))
    if fresh != text:
      stale.append(os.path.relpath(page, root))
      if not check:
        with open(page, "w") as f:
          f.write(fresh)
  return stale


def main(*, check: bool) -> None:
  stale = update_docs(check=check)
  if check and stale:
    print(f"error: tables differ from their JSON in {', '.join(stale)}; run "
          f"`python -m benchmarks.docs`.", file=sys.stderr)
    sys.exit(1)
  print(f"{'stale' if check else 'rewrote'}: {', '.join(stale) or 'nothing'}")


if __name__ == "__main__":
  # Flags only when run: a study's publish imports this module beside the study's own flags.
  from absl import app, flags
  _CHECK = flags.DEFINE_bool("check", False, "Only report the tables that differ; exit 1 if any.")
  app.run(lambda argv: main(check=_CHECK.value))

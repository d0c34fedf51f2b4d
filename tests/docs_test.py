"""The docs as a newcomer meets them: a README whose first screen says what the project is and how
to install, run and test it; an index of guides and results; tables and quoted figures equal to the
JSON they were rendered from, and no measured figure typed by hand in the README or a guide; no
word of how the project was made; every benchmark runnable as `python -m benchmarks.GROUP.NAME`
and named in benchmarks/README.md's map."""

import ast
import contextlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile

from absl import flags
from absl.testing import absltest

import benchmarks
from benchmarks import docs, figures
from tests import testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def benchmark_modules() -> dict[str, str]:
  """Every module of benchmarks/ (dotted below it: "speed.throughput") → its source."""
  modules = {}
  for directory, _, files in os.walk(os.path.join(ROOT, "benchmarks")):
    for name in files:
      if name.endswith(".py") and name != "__init__.py":
        path = os.path.join(directory, name)
        dotted = os.path.relpath(path, os.path.join(ROOT, "benchmarks"))[:-3].replace(os.sep, ".")
        with open(path) as f:
          modules[dotted] = f.read()
  return modules


# The modules of benchmarks/ that run (the others are shared helpers and tables).
BENCHMARKS = sorted(name for name, source in benchmark_modules().items()
                    if 'if __name__ == "__main__":' in source)


# Placeholders the docs write in commands, and what stands in for them when a command is checked.
PLACEHOLDERS = {"N": "2", "I": "0"}


def commands_in(text: str):
  """(program, argv) of each `python -m benchmarks.X ...`, `python -m input_pipeline.prepare ...`
  and `python main.py ...` in a page.

  Commands are read from code blocks (a trailing backslash continues a line; `#` starts a
  comment) and from inline code spans (which may wrap). One naming a placeholder program or
  config (NAME) stands for many and is left out; N and I take the values in PLACEHOLDERS."""
  blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
  lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
  outside_blocks = re.sub(r"```.*?```", "", text, flags=re.S)
  lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", outside_blocks)]
  for line in lines:
    line = line.split(" #")[0]
    for found in re.finditer(r"python (?:-m (benchmarks(?:\.\w+)+|input_pipeline\.prepare)|"
                             r"(main\.py))((?:\s+--\S+)*)", line):
      program, argv = found.group(1) or found.group(2), found.group(3).split()
      if "NAME" in program or any("NAME" in arg for arg in argv):
        continue
      yield program, [re.sub(r"=([A-Z])$", lambda m: "=" + PLACEHOLDERS[m.group(1)], arg)
                      for arg in argv]


def documented_commands():
  """(page, program, argv) for every command in README.md and docs/*.md a user may run: not those
  of the record lines, which say what command made a results file, as it was typed then."""
  for page in docs.pages(ROOT):
    with open(page) as f:
      text = re.sub(r"<!-- record: .*?<!-- end record -->", "", f.read(), flags=re.S)
      for program, argv in commands_in(text):
        yield os.path.relpath(page, ROOT), program, argv


def python_output(test: absltest.TestCase, code: str, *args: str) -> str:
  """What `python -c code args` printed, in a process of its own (a study defines absl flags,
  which one process can hold once), after asserting that it succeeded."""
  result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
  test.assertEqual(result.returncode, 0, result.stderr[-2000:])
  return result.stdout


# Run as `python -c _PARSE_DOCUMENTED DOCUMENTED_JSON` ({NAME: [argv, ...]}): for each benchmark in
# turn, imports benchmarks.NAME, parses each argv with its flags, and prints a JSON line of how
# many it accepted and the usage `python -m benchmarks.NAME --help` would print (or the error);
# then forgets its flags and the benchmarks' modules it imported, so that the next one defines
# its own afresh, as in a process of its own. One interpreter for all of them: each would import
# JAX and the project again (17 interpreters took ~40 s of CPU).
_PARSE_DOCUMENTED = """
import importlib, json, sys, traceback
from absl import flags
import benchmarks
documented = json.loads(sys.argv[1])
own_flags, own_modules = set(flags.FLAGS), set(sys.modules)
for name, argvs in documented.items():
  try:
    module = importlib.import_module("benchmarks." + name)
    for argv in argvs:
      flags.FLAGS.unparse_flags()
      flags.FLAGS([name, *argv])
    print(json.dumps({"name": name, "accepted": len(argvs), "usage": module.__doc__ + " " +
                      flags.FLAGS.module_help(module.__name__)}))
  except BaseException:  # a command refused (absl raises) or a module that fails: said, and on.
    print(json.dumps({"name": name, "error": traceback.format_exc()[-2000:]}))
  for defined in set(flags.FLAGS) - own_flags:
    delattr(flags.FLAGS, defined)
  for imported in set(sys.modules) - own_modules:
    if imported.startswith("benchmarks."):
      del sys.modules[imported]
"""


def read(path: str) -> str:
  with open(os.path.join(ROOT, path)) as f:
    return f.read()


def index_sections() -> dict[str, list[str]]:
  """docs/README.md's sections ("Guides", "Results") → the pages they link, in order."""
  sections, current = {}, None
  for line in read(os.path.join("docs", "README.md")).splitlines():
    if line.startswith("## "):
      current = sections.setdefault(line[3:].strip(), [])
    elif current is not None:
      current += re.findall(r"\]\(([\w-]+\.md)\)", line)
  return sections


def guides() -> list[str]:
  """README.md and the guides the index lists: the pages every measured figure of which must be
  rendered from a record."""
  return ["README.md"] + [os.path.join("docs", page) for page in index_sections()["Guides"]]


# A measured figure: a number with a unit of time, rate, share or ratio. "8 × 32", "2×4" and
# "1 × M" are shapes (a × followed by a number or a one-letter size), not ratios; a number inside
# a code span is a setting a user types (`--config.global_batch_size=256`, `step_timeout_s=600`),
# not a figure.
MEASURED = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?[\s-]?"
    r"(?:%|×(?!\s?(?:\d|[A-Z]\b))|x\b(?![\s-]?\d)|ms\b|s\b|sec(?:onds?)?\b|min(?:utes?)?\b"
    r"|h\b|hours?\b|days?\b|images/s\b|(?:[kMGT]B|Gb|[GT]FLOP)/s\b|MFU\b)")

# Figures that are settings of the machine a user describes, not measurements: each with why.
SETTINGS = {
    "400 Gb/s",  # a NIC's rating, the --inter_node_gb_per_s a user gives choose_scheme (50 GB/s).
    "75%",  # the share of a GPU's memory JAX takes by default (XLA_PYTHON_CLIENT_MEM_FRACTION).
    "600 s",  # config.step_timeout_s's default, as the watchdog's message quotes it.
}


def measured_figures(text: str) -> list[str]:
  """The measured figures typed by hand in `text`: those outside table blocks, figure spans,
  record lines (a results file's date, machine and command), HTML comments and inline code
  spans, less the SETTINGS."""
  text = docs._BLOCK.sub("", text)
  text = docs.FIGURE.sub("", text)
  text = re.sub(r"<!-- record: .*?<!-- end record -->", "", text, flags=re.S)
  text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
  text = re.sub(r"```.*?```", lambda m: re.sub(r"`", "", m.group(0)), text, flags=re.S)
  text = re.sub(r"`[^`\n]+`", "", text)
  return [m.group(0).strip() for m in MEASURED.finditer(text)
          if m.group(0).strip() not in SETTINGS]


# Words of how the project was made, which a user has no use for.
MAKING = re.compile(r"\blent\b|\bleases?\b|\bleased\b|\bthe issue\b|\bissue's\b|\bgoals?\b"
                    r"|\bgoal set\b|lent_gpu|\bthe lead\b", re.I)


def user_facing_texts():
  """(where, text) for every text a user reads: README.md, docs/*.md, benchmarks/README.md, and
  every string of the code they run or open (docstrings, messages, flag help) — configs/,
  main.py, train.py, experiment.py, validation.py, input_pipeline/, hybrid_parallel/,
  benchmarks/, notebooks/ (the notebook's cells too). Comments and tests are for contributors."""
  for page in docs.pages(ROOT) + [os.path.join(ROOT, "benchmarks", "README.md")]:
    with open(page) as f:
      yield os.path.relpath(page, ROOT), f.read()
  files = ["main.py", "train.py", "experiment.py", "validation.py"]
  for folder in ("configs", "input_pipeline", "hybrid_parallel", "benchmarks", "notebooks"):
    for directory, _, names in os.walk(os.path.join(ROOT, folder)):
      files += [os.path.relpath(os.path.join(directory, n), ROOT) for n in names
                if n.endswith((".py", ".ipynb"))]
  for name in files:
    text = read(name)
    if name.endswith(".ipynb"):
      yield name, "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
      continue
    for node in ast.walk(ast.parse(text)):
      if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield f"{name}:{node.lineno}", node.value


def anchor(heading: str) -> str:
  """GitHub's anchor of a Markdown heading."""
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


class ReadmeTest(absltest.TestCase):

  def test_no_page_or_json_holds_a_path_of_the_machine_it_was_made_on(self):
    # Benchmarks write tracebacks into their JSON (benchmarks/speed/accelerator.py strips them).
    docs = os.path.join(ROOT, "docs")
    for name in ["README.md"] + [os.path.join("docs", f) for f in os.listdir(docs)
                                 if f.endswith((".md", ".json", ".csv"))]:
      with open(os.path.join(ROOT, name)) as f:
        text = f.read()
      self.assertNotIn(ROOT + os.sep, text, name)
      self.assertNotRegex(text, r"/[^\s\"']*/site-packages/", name)

  def test_the_first_screen_says_what_it_is_and_how_to_install_run_and_test_it(self):
    # What a reader sees before scrolling (~40 lines): a paragraph saying what the project is,
    # then the install, run and test commands, in a code block.
    screen = read("README.md").splitlines()[:40]
    first_section = next(i for i, line in enumerate(screen) if line.startswith("## "))
    what = " ".join(line for line in screen[1:first_section] if line.strip())
    self.assertRegex(what, r"\bTrain\b.*\bAlexNet\b.*\bparallel", "what it is")
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", "\n".join(screen), re.S))
    self.assertRegex(commands, r"(?m)^pip install -r requirements\.txt", "the install")
    self.assertRegex(commands, r"(?m)^python main\.py --config=configs/\w+\.py", "a run")
    self.assertRegex(commands, r"(?m)^python -m pytest\b.* tests\b", "the tests")

  def test_the_readme_links_the_index_and_the_index_names_every_page_once(self):
    readme = read("README.md")
    self.assertIn("](docs/README.md)", readme)
    for guide in index_sections()["Guides"][:4]:  # the first guides, from the README too.
      self.assertIn(f"](docs/{guide})", readme)
    sections = index_sections()
    self.assertEqual(sorted(sections), ["Guides", "Results"])
    listed = sections["Guides"] + sections["Results"]
    self.assertEqual(len(listed), len(set(listed)), "a page listed twice")
    pages = {f for f in os.listdir(os.path.join(ROOT, "docs"))
             if f.endswith(".md") and f != "README.md"}
    self.assertEqual(set(listed), pages)

  def test_every_link_reaches_its_file_and_heading(self):
    for page in docs.pages(ROOT) + [os.path.join(ROOT, "benchmarks", "README.md")]:
      with open(page) as f:
        text = f.read()
      for target, fragment in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", text):
        if "://" in target:
          continue
        path = os.path.join(os.path.dirname(page), target) if target else page
        where = f"{os.path.relpath(page, ROOT)} links to {target}#{fragment}"
        self.assertTrue(os.path.exists(path), where)
        if fragment and path.endswith(".md"):
          with open(path) as f:
            headings = [anchor(h) for h in re.findall(r"(?m)^#+ (.*)$",
                                                      re.sub(r"```.*?```", "", f.read(),
                                                             flags=re.S))]
          self.assertIn(fragment, headings, where)

  def test_readme_and_guides_quote_every_measured_figure_from_a_record(self):
    # A number with a unit of time, rate, share or ratio in README.md or a guide is a
    # measurement: it must be a figure span rendered from a study's JSON (benchmarks/figures.py),
    # which test_every_table_and_figure_equals_its_json holds to its JSON.
    for page in guides():
      self.assertEqual(measured_figures(read(page)), [], page)

  def test_a_figure_typed_by_hand_is_found_and_a_rendered_one_is_not(self):
    text = ("It took <!-- figure: table1.hybrid4.wall_clock -->130 s<!-- end --> on 2 × 2, "
            "`--config.step_timeout_s=600`, 4×4 devices, 1 × M, a 400 Gb/s NIC; then 97.2% test "
            "top-1 after 300 steps, 1.99× PyTorch, 30–40 s to install, 87,373 images/s, a 9-minute "
            "run."
            "\n```bash\npython main.py --config=configs/hybrid4.py  # about 2 h\n```\n"
            "<!-- table: table1 -->\n| 150.3 s |\n<!-- end table -->\n")
    self.assertEqual(measured_figures(text),
                     ["97.2%", "1.99×", "40 s", "87,373 images/s", "9-minute", "2 h"])

  def test_no_text_a_user_reads_speaks_of_how_the_project_was_made(self):
    found = [(where, m.group(0)) for where, text in user_facing_texts()
             for m in MAKING.finditer(text)]
    self.assertEqual(found, [])

  def test_the_words_test_reads_pages_code_strings_and_notebook_cells(self):
    places = {where.split(":")[0] for where, _ in user_facing_texts()}
    self.assertContainsSubset({"README.md", "docs/README.md", "benchmarks/README.md",
                               "configs/owt8.py", "main.py", "notebooks/colab.ipynb",
                               "benchmarks/speed/accelerator.py"}, places)
    self.assertEqual([m.group(0) for m in MAKING.finditer(
        "on a lent GPU, the issue's goal ≥ 25%, bash lent_gpu.sh, in this lease; a goals list; "
        "talent, release, reissue")], ["lent", "the issue", "goal", "lent_gpu", "lease", "goals"])


# A %-format field (logging's) or a str.format field: where a message's values go.
_FIELD = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifgr]|\{[^{}]*\}")


def message_templates() -> list[tuple[str, ...]]:
  """Every string of the code a user runs, as the literal pieces between its values: an f-string's
  text between its `{…}`, a %-format or str.format string's between its fields."""
  found = []
  files = ["main.py", "train.py", "experiment.py", "validation.py"]
  for folder in ("configs", "input_pipeline", "hybrid_parallel", "benchmarks", "notebooks"):
    for directory, _, names in os.walk(os.path.join(ROOT, folder)):
      files += [os.path.relpath(os.path.join(directory, n), ROOT) for n in names
                if n.endswith(".py")]
  for name in files:
    for node in ast.walk(ast.parse(read(name))):
      if isinstance(node, ast.JoinedStr):
        pieces, current = [], ""
        for value in node.values:
          if isinstance(value, ast.Constant):
            current += value.value
          else:
            pieces.append(current)
            current = ""
        found.append((*pieces, current))
      elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        found.append(tuple(_FIELD.split(node.value)))
  return found


def printed_by_the_code(fragment: str, templates, *, depth: int = 1) -> bool:
  """Whether `fragment`, text a page quotes with example values, is a stretch of some message the
  code can print: within one literal piece, or from the end of one piece across values and whole
  pieces to the start of another. It begins and ends inside the code's words (or at a value that
  begins or ends the message), and the code's words make at least half of it — a value that is
  itself a message the code prints counting as words (main.py's `error: {message}`, a watchdog's
  `{what}`) — so that no value stands in for words the code does not print."""
  for pieces in templates:
    if any(fragment in piece for piece in pieces):
      return True
    for first in range(len(pieces)):
      heads = [pieces[first][k:] for k in range(len(pieces[first]) + 1)
               if fragment.startswith(pieces[first][k:])]
      if first > 0 or pieces[0]:  # a value may begin the message; else a piece's end must.
        heads = [head for head in heads if head]
      for last in range(first + 1, len(pieces)):
        middle = pieces[first + 1:last]
        if not heads or not all(piece in fragment for piece in middle):
          continue
        tails = [pieces[last][:k] for k in range(len(pieces[last]) + 1)
                 if fragment.endswith(pieces[last][:k])]
        if last < len(pieces) - 1 or pieces[-1]:
          tails = [tail for tail in tails if tail]
        for head in heads:
          for tail in tails:
            pattern = "".join([re.escape(head), *("(.+?)" + re.escape(p) for p in middle),
                               "(.+?)", re.escape(tail)])
            found = re.fullmatch(pattern, fragment, re.S)
            if not found:
              continue
            words = len(head) + sum(map(len, middle)) + len(tail)
            if 2 * words < len(fragment) and depth:  # the values that are messages, then.
              words += sum(len(value) for value in found.groups() if len(value) > 12 and
                           printed_by_the_code(value, templates, depth=0))
            if 2 * words >= len(fragment):
              return True
  return False


def quoted_messages(page: str) -> list[str]:
  """The messages `page` quotes: each line of its ```text blocks, split where `[…]` leaves text
  out."""
  blocks = re.findall(r"```text\n(.*?)```", read(page), re.S)
  return [fragment.strip() for block in blocks for line in block.splitlines() if line.strip()
          for fragment in line.split("[…]") if fragment.strip()]


# The glossary's terms (docs/glossary.md's headings, by anchor): how a guide writes each. A term a
# user types (`_tiny`, `n_sync`, `decoded_placement`) is read in code spans too.
GLOSSARY = {
    "mesh": r"\bmesh(?:es)?\b", "axis": r"\baxis\b|\baxes\b", "scheme": r"\bschemes?\b",
    "global-batch": r"\bglobal batch\b", "owt-a-b-c": r"\([abc]\)(?:,| or| and|/)",
    "columns-and-lrn": r"\bLRN\b|\bcolumns?\b", "_tiny": r"_tiny\b",
    "stand-ins": r"\bstand-ins?\b|\bstand in\b|\bsimulated\b", "test-top-1": r"\btop-1\b",
    "interval": r"\bintervals?\b", "bare-step": r"\bbare step", "mfu": r"\bMFU\b",
    "time-model": r"\btime model\b", "compile-only": r"\bcompile-only\b",
    "n_sync": r"\bn_sync\b", "yuv-420": r"YUV 4:2:0", "decoded_placement": r"\bdecoded_placement\b",
    "extra": r"\bextras?\b",
}
IN_CODE = {"_tiny", "n_sync", "decoded_placement"}


def prose(text: str) -> str:
  """What a reader reads as running text: no code blocks, headings, HTML comments, rendered
  tables or record lines (each replaced by as many spaces, so that positions hold)."""
  blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
  for pattern in (r"```.*?```", docs._BLOCK.pattern, r"<!-- record: .*?<!-- end record -->",
                  r"<!--.*?-->", r"(?m)^#[^\n]*"):
    text = re.sub(pattern, blank, text, flags=re.S)
  return text


def unlinked_first_uses(text: str, glossary: str) -> list[str]:
  """The glossary's terms whose first use in `text` is not a link to their entry (`glossary`:
  the page's path to docs/glossary.md)."""
  text = prose(text)
  links = [(m.start(1), m.end(1), m.group(2)) for m in re.finditer(
      r"\[((?:[^\]\[]|`[^`]*`)*)\]\(([^)\s]*)\)", text)]
  # Link targets are no text; code spans are a user's typing, not the term in prose.
  text = re.sub(r"\]\([^)\s]*\)", lambda m: "]" + " " * (len(m.group(0)) - 1), text)
  without_code = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), text)
  unlinked = []
  for term, pattern in GLOSSARY.items():
    found = re.search(pattern, text if term in IN_CODE else without_code, re.I)
    if found and not any(start <= found.start() < end and target == f"{glossary}#{term}"
                         for start, end, target in links):
      unlinked.append(term)
  return unlinked


# What has never run, said where a user decides: on each guide of a path nobody has run yet, in
# the same words as the README's list of guides. Each checked against the results pages: gpu.md
# measures one H200 and one H100 and predicts 8-GPU nodes; tpu.md compiles and estimates; the
# multi-process tests run on one machine's CPU devices; no ImageNet training has run.
NOT_RUN_YET = {
    "gpu_server.md": "no GPU has run the project end to end on 8 GPUs yet",
    "tpu_vm.md": "no TPU has run the project yet",
    "imagenet.md": "ImageNet accuracy is not yet measured here",
    "hosts.md": "no run on several GPU hosts yet",
}


class NotRunYetTest(absltest.TestCase):

  def test_each_guide_says_what_has_not_run_in_its_first_lines_as_the_readme_does(self):
    readme = read("README.md").splitlines()
    for page, said in NOT_RUN_YET.items():
      first = " ".join(read(os.path.join("docs", page)).splitlines()[:12])
      self.assertIn(said.lower(), first.lower(), page)
      # The README's entry for the page: its line and the lines that continue it.
      start = next(i for i, line in enumerate(readme) if f"](docs/{page})" in line)
      entry = " ".join([readme[start]] + list(
          itertools.takewhile(lambda line: line.startswith("  "), readme[start + 1:])))
      self.assertIn(said.lower(), " ".join(entry.split()).lower(), page)


class GlossaryTest(absltest.TestCase):

  def test_each_term_is_defined_once(self):
    headings = [anchor(h) for h in re.findall(r"(?m)^### (.*)$", read("docs/glossary.md"))]
    self.assertEqual(sorted(headings), sorted(GLOSSARY))

  def test_each_guide_links_a_term_where_it_first_uses_it(self):
    unlinked = {}
    for page in guides():
      if page != os.path.join("docs", "glossary.md"):
        glossary = "docs/glossary.md" if page == "README.md" else "glossary.md"
        unlinked[page] = unlinked_first_uses(read(page), glossary)
    self.assertEqual({page: terms for page, terms in unlinked.items() if terms}, {})

  def test_a_first_use_outside_a_link_is_found(self):
    self.assertEqual(unlinked_first_uses("Each mesh, then a [mesh](glossary.md#mesh).",
                                         "glossary.md"), ["mesh"])
    self.assertEqual(unlinked_first_uses("A [mesh](glossary.md#mesh), then a mesh; `mesh.data`, "
                                         "a [mesh](hosts.md).", "glossary.md"), [])
    # Headings, code blocks and comments are not prose; a term typed in code is, for `_tiny`.
    self.assertEqual(unlinked_first_uses("# A mesh\n```\nmesh\n```\n<!-- mesh -->\n`x_tiny`",
                                         "glossary.md"), ["_tiny"])


class TroubleshootingTest(absltest.TestCase):

  def test_every_message_it_quotes_is_one_the_code_prints(self):
    templates = message_templates()
    quoted = quoted_messages(os.path.join("docs", "troubleshooting.md"))
    self.assertGreaterEqual(len(quoted), 8)
    self.assertEqual([q for q in quoted if not printed_by_the_code(q, templates)], [])

  def test_a_quote_must_match_the_codes_words_around_its_values(self):
    templates = [("the ", "×", " mesh needs ", " devices but JAX has ", " ", " device(s) here")]
    for held in ("the 2×4 mesh needs 8 devices but JAX has 4 GPU device(s) here",
                 "mesh needs 8 devices", "needs 8 devices but JAX"):
      self.assertTrue(printed_by_the_code(held, templates), held)
    templates.append(("error: ", ""))  # a value alone holds no words.
    for invented in ("the 2×4 mesh wants 8 devices but JAX has 4 GPU device(s) here",
                     "error: the 2×4 mesh wants 8 devices",
                     "the 2×4 mesh needs 8 devices but JAX had 4 GPU device(s) here",
                     "needs 8 devices and JAX"):
      self.assertFalse(printed_by_the_code(invented, templates), invented)

  def test_it_is_linked_from_the_readme_and_the_index(self):
    self.assertIn("](docs/troubleshooting.md)", read("README.md"))
    self.assertIn("troubleshooting.md", index_sections()["Guides"])


class TablesTest(absltest.TestCase):

  def test_every_table_and_figure_equals_its_json(self):
    self.assertEqual(docs.update_docs(ROOT, check=True), [])

  def test_every_declared_figure_is_quoted_somewhere(self):
    quoted = set()
    for page in docs.pages(ROOT):
      with open(page) as f:
        quoted |= {m.group("name") for m in docs.FIGURE.finditer(f.read())}
    self.assertEqual(quoted, set(figures.FIGURES))

  def test_a_stale_figure_is_rewritten_from_its_json_and_an_unknown_one_refused(self):
    text = "took <!-- figure: table1.hybrid4.wall_clock -->30–40 s<!-- end --> here\n"
    record, rows = benchmarks.load_results(os.path.join(ROOT, "docs", "table1.json"))
    hybrid4 = next(r for r in rows if r["config"] == "hybrid4")
    self.assertEqual(docs.refresh(text), "took <!-- figure: table1.hybrid4.wall_clock -->"
                     f"{hybrid4['wall_clock_s']:.0f} s<!-- end --> here\n")
    # A figure of the record: where and when the figures beside it were measured.
    self.assertEqual(docs.refresh("on <!-- figure: table1.date -->long ago<!-- end -->"),
                     f"on <!-- figure: table1.date -->{record['date']}<!-- end -->")
    with self.assertRaisesRegex(KeyError, "no figure named made.up"):
      docs.refresh("<!-- figure: made.up -->97.2%<!-- end -->")

  def test_every_measured_table_is_included_somewhere(self):
    included = set()
    for page in docs.pages(ROOT):
      with open(page) as f:
        included |= set(re.findall(r"<!-- table: ([\w-]+) -->", f.read()))
    self.assertContainsSubset(included, set(docs.SOURCES))
    self.assertEqual(included, {name for name in docs.SOURCES if docs.measured(name)})

  def test_the_large_batch_summary_takes_each_rules_best_over_three_seeds(self):
    def setting(batch, rule, top1s, part="sweep"):
      row = dict(part=part, model="m", global_batch=batch, rule=rule, steps=1)
      for seed, top1 in enumerate(top1s):  # None: the seed diverged, at step 7.
        benchmarks.add_seed(row, seed, {"eval_top1": top1,
                                        "diverged_at_step": None if top1 else 7})
      return row
    results = [setting(32, "none", [0.9] * 3), setting(256, "none", [0.5, 0.6, 0.4]),
               setting(256, "lars", [0.2] * 3), setting(256, "lars", [0.7, 0.8, 0.6]),
               setting(256, "lars", [0.99]),  # one seed: not the summary's.
               setting(512, "none", [None] * 3), setting(512, "lars", [0.4, 0.4, None]),
               setting(256, "none", [0.99] * 3, part="grid")]  # not the sweep's.
    summary, _ = docs.SOURCES["large_batch_summary"]
    # mean ± sd over the seeds that finished [± √(p(1−p)/360), digits' test set].
    self.assertEqual(summary(results).splitlines(), [
        "| model | batch 32, none | 256, none | 256, lars | 512, best rule |",
        "|---|---|---|---|---|",
        "| m | 90.0 ± 0.0 [± 1.6] | 50.0 ± 10.0 [± 2.6] | 70.0 ± 10.0 [± 2.4] "
        "| lars 40.0 ± 0.0 [± 2.6] (1 of 3 seeds NaN) |"])
    sweep, _ = docs.SOURCES["large_batch"]  # every setting, the one-seed best included.
    self.assertEqual(sweep(results).splitlines()[3:], [
        "| m | 256 | 1 | 50.0 ± 10.0 [± 2.6] | 99.0 [± 0.5], 1 seed |",
        "| m | 512 | 1 | NaN on all 3 seeds (step 7, 7, 7) | 40.0 ± 0.0 [± 2.6] (1 of 3 seeds "
        "NaN) |"])

  def test_a_stale_block_is_found_and_rewritten(self):
    text = "before\n<!-- table: max_pool -->\n| made up |\n<!-- end table -->\nafter\n"
    fresh = docs.refresh(text)
    self.assertNotEqual(fresh, text)
    self.assertIn(docs.render("max_pool"), fresh)
    self.assertTrue(fresh.startswith("before\n") and fresh.endswith("after\n"))
    self.assertEqual(docs.refresh(fresh), fresh)


class BenchmarksTest(absltest.TestCase):

  def test_each_documents_its_usage_and_accepts_the_commands_the_docs_give(self):
    # One fresh interpreter, each benchmark's flags defined afresh in turn (_PARSE_DOCUMENTED).
    # A command is accepted when absl parses it: unknown flags, bad values and each
    # benchmark's validators (e.g. "--config or --all") fail there, before any work.
    documented = {name: [] for name in BENCHMARKS}
    for page, program, argv in documented_commands():
      if program.startswith("benchmarks."):
        documented[program.split(".", 1)[1]].append(argv)
    result = subprocess.run([sys.executable, "-c", _PARSE_DOCUMENTED, json.dumps(documented)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    parsed = {row["name"]: row for row in map(json.loads, re.findall(
        r'^\{"name": .*$', result.stdout, re.M))}  # its lines, amid what a module may print.
    self.assertEqual(list(parsed), list(documented))
    for name, row in parsed.items():
      self.assertNotIn("error", row, f"{name}: {row.get('error')}")
      self.assertEqual(row["accepted"], len(documented[name]), name)
      usage = row["usage"]
      self.assertIn(f"python -m benchmarks.{name}", usage, name)  # its docstring's usage,
      self.assertIn("--", usage.split(f"python -m benchmarks.{name}", 1)[-1], name)  # its flags.

  def test_the_map_names_every_module_and_no_module_is_a_hub(self):
    with open(os.path.join(ROOT, "benchmarks", "README.md")) as f:
      readme = f.read()
    modules = benchmark_modules()
    for name in modules:
      group, _, module = name.rpartition(".")
      named = re.search(rf"`{module}\.py`" if not group else
                        rf"`{group}/`[^\n]*(\n  [^\n]*)*`{module}\.py`", readme)
      self.assertTrue(named, f"benchmarks/README.md's map does not name {name}")
    # Who imports each module of benchmarks/ (the package's own namespace, what every study
    # shares, aside): at most five others, so that no change to one ripples through all. The
    # tests are not counted: a test imports the module it tests, and the tables and topologies
    # each study shares are tested where they are used.
    importers = {name: set() for name in modules}
    for directory, _, files in os.walk(ROOT):
      if os.sep + "." in directory or directory == os.path.join(ROOT, "tests"):
        continue  # virtual environments, .git; the tests
      for file in (f for f in files if f.endswith(".py")):
        path = os.path.join(directory, file)
        with open(path) as f:
          tree = ast.parse(f.read())
        for node in ast.walk(tree):
          names = ([f"{node.module}.{a.name}" for a in node.names] + [node.module]
                   if isinstance(node, ast.ImportFrom) and node.module else
                   [a.name for a in node.names] if isinstance(node, ast.Import) else [])
          for imported in names:
            if imported.startswith("benchmarks.") and imported[11:] in importers:
              importers[imported[11:]].add(path)
    hubs = {name: len(paths) for name, paths in importers.items() if len(paths) > 5}
    self.assertEqual(hubs, {})

  def test_a_list_of_choices_refuses_an_unknown_item_or_none_while_parsing(self):
    def parse(*argv, default=None):
      flag_values = flags.FlagValues()
      chosen = benchmarks.define_choices("parts", ("cause", "paine"), "Parts.", default=default,
                                         flag_values=flag_values)
      flag_values(["study", *argv])
      self.assertEqual(flag_values["parts"].help, "Parts. Of: cause, paine.")
      return chosen.value
    self.assertEqual(parse(), ["cause", "paine"])
    self.assertEqual(parse(default=("paine",)), ["paine"])
    self.assertEqual(parse("--parts=paine,cause"), ["paine", "cause"])
    for bad in ("--parts=paine,su", "--parts="):
      with self.assertRaisesRegex(flags.IllegalFlagValueError,
                                  r"--parts: choose one or more of cause, paine\.$"):
        parse(bad)
    # A study refuses it as one line before any work: nothing written.
    with tempfile.TemporaryDirectory() as out:
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.asynchronous", f"--out={out}",
           "--parts=paine1,su,nope"], cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertIn("--parts: choose one or more of reference, synchronous, momentum, staleness, "
                    "summing, paine1, paine2, paine3, speeds, speeds_paine1, speeds_control, su, "
                    "validate, overlap.", result.stderr)
      self.assertEqual(os.listdir(out), [])
      # A part that reads an earlier part's choice, with neither its runs nor that part.
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.asynchronous", f"--out={out}",
           "--parts=paine1,reference"], cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip().splitlines()[-1],
                       "error: --parts=paine1 needs the reference part's runs (its one client "
                       "rate), which are not in --out: run --parts=reference first, or before it "
                       "in --parts.")
      self.assertEqual(os.listdir(out), [])

  def test_asynchronous_keeps_every_seed_it_has_and_drops_settings_no_longer_made(self):
    # Seeds 2, 0, 1 of a setting already there and --seeds=1 asked: all three kept, in seed
    # order, none trained (a trained row would lack "kept"); a setting its part no longer makes
    # is dropped.
    code = (
        "import dataclasses, json\n"
        "from benchmarks.papers import asynchronous as a\n"
        "setting = a.synchronous_settings()[0]\n"
        "row = lambda seed: {**dataclasses.asdict(setting), 'seed': seed, 'kept': True}\n"
        "gone = {**row(3), 'label': 'a setting no longer made'}\n"
        "rows = a.run_settings([setting], seeds=[1], all_machines=a.machines(),\n"
        "                      done=[row(2), row(0), gone, row(1)])\n"
        "print(json.dumps([[r['seed'], r.get('kept'), r['label']] for r in rows]))\n")
    label = "data 8×1, rate 0.025"
    self.assertEqual(json.loads(python_output(self, code).splitlines()[-1]),
                     [[0, True, label], [1, True, label], [2, True, label]])

  def test_asynchronous_reprices_the_runs_it_keeps(self):
    # Two kept runs carrying each other's prices (as after a change to the time model): each
    # leaves with its own setting's price and, the A-SGD run, with the staleness its clients saw
    # (replayed from its seed: 8 clients at n_sync 1, every push simultaneous, none stale);
    # nothing else of either changes.
    code = (
        "import dataclasses, json\n"
        "from benchmarks.papers import asynchronous as a\n"
        "machines = a.machines()\n"
        "settings = [a.synchronous_settings()[0], a.momentum_settings()[0]]\n"
        "prices = [a.predicted_step_s(s, machines) for s in settings]\n"
        "runs = [{**dataclasses.asdict(s), 'seed': 4, 'final_eval_top1': 0.5,\n"
        "         'predicted_step_s': price} for s, price in zip(settings, prices[::-1])]\n"
        "print(json.dumps({'prices': prices, 'runs': runs,\n"
        "                  'repriced': a.repriced(runs, machines)}))\n")
    out = json.loads(python_output(self, code).splitlines()[-1])
    self.assertNotEqual(out["prices"][0], out["prices"][1])  # else the swap proves nothing.
    self.assertEqual([r["predicted_step_s"] for r in out["repriced"]], out["prices"])
    self.assertNotIn("staleness", out["repriced"][0])  # data parallelism has no server.
    seen = out["repriced"][1].pop("staleness")
    self.assertEqual((seen["pushes"], seen["staleness_max"], seen["client_steps"]),
                     (8 * 450, 0, [450] * 8))
    self.assertEqual([{**r, "predicted_step_s": None} for r in out["repriced"]],
                     [{**r, "predicted_step_s": None} for r in out["runs"]])

  def test_every_main_command_in_the_docs_describes_a_run(self):
    # --dry_run checks every flag and config field and resolves the run, touching nothing: in
    # this process (testing.main_in_process), from the repository root as the docs run them.
    commands = [argv for _, program, argv in documented_commands() if program == "main.py"]
    self.assertGreaterEqual(len(commands), 3)  # the README's and docs/faults.md's two.
    cwd = os.getcwd()
    os.chdir(ROOT)
    self.addCleanup(os.chdir, cwd)
    for argv in commands:
      output = io.StringIO()
      with contextlib.redirect_stdout(output):
        code, errors = testing.main_in_process([*argv, "--dry_run"])
      self.assertEqual(code, 0, f"{argv}: {errors[-2000:]}")
      self.assertIn('"mesh"', output.getvalue(), argv)

  def test_every_prepare_command_in_the_docs_parses(self):
    # With flags: a command (a bare `python -m input_pipeline.prepare` names the program).
    commands = [argv for _, program, argv in documented_commands()
                if program == "input_pipeline.prepare" and argv]
    self.assertGreaterEqual(len(commands), 3)  # docs/input_pipeline.md's two, the README's.
    code = ("import json, sys\nfrom absl import flags\nfrom input_pipeline import prepare\n"
            "prepare.define_flags()\nfor argv in json.loads(sys.argv[1]):\n"
            "  flags.FLAGS.unparse_flags()\n  flags.FLAGS(['prepare', *argv])\n"
            "print('accepted', len(json.loads(sys.argv[1])))\n")
    self.assertIn(f"accepted {len(commands)}", python_output(self, code, json.dumps(commands)))

  def test_commands_are_read_from_spans_blocks_and_continued_lines(self):
    text = ("Run `python -m benchmarks.communication.comm_volume --all\n  --paper_sizes` (or "
            "not).\n"
            "```bash\n# on each host\npython main.py --config=configs/hybrid4.py \\\n"
            "    --num_processes=N --process_id=I  # the coordinator\n```\n"
            "`python -m benchmarks.NAME` runs each.\n")
    self.assertEqual(list(commands_in(text)), [
        ("main.py", ["--config=configs/hybrid4.py", "--num_processes=2", "--process_id=0"]),
        ("benchmarks.communication.comm_volume", ["--all", "--paper_sizes"])])

  def test_large_batch_refuses_bad_settings_before_training(self):
    with tempfile.TemporaryDirectory() as out:
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.large_batch", f"--out={out}",
           "--models=alexnet", "--batches=64", "--rules=lars", "--epochs=15",
           "--warmup_epochs=20"],
          cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 1, result.stderr[-2000:])
      self.assertEqual(result.stderr.strip(), "error: warmup_epochs 20.0 is longer than the "
                       "run's num_epochs 15.")
      self.assertEqual(os.listdir(out), [])  # nothing trained, nothing written.

  def test_large_batch_adds_seeds_to_a_setting_and_trains_none_twice(self):
    # Seed 0, then seeds 0-1: the second run trains only seed 1 of `none`, and `linear` (the same
    # run at the reference batch) takes each seed's result from it rather than training.
    def sweep(out, seeds):
      result = subprocess.run(
          [sys.executable, "-m", "benchmarks.papers.large_batch", f"--out={out}",
           "--models=alexnet_owt_tiny", "--batches=32", "--rules=none,linear", "--epochs=1",
           f"--seeds={seeds}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(result.returncode, 0, result.stderr[-2000:])
      _, rows = benchmarks.load_results(os.path.join(out, "large_batch.json"))
      return result.stdout.count('"seed": '), {r["rule"]: r for r in rows}
    with tempfile.TemporaryDirectory() as out:
      trained, first = sweep(out, "0")
      self.assertEqual(trained, 1)
      trained, rows = sweep(out, "0,1")
      self.assertEqual(trained, 1)
    none, linear = rows["none"], rows["linear"]
    self.assertEqual((none["seeds"], linear["seeds"], linear["same_run_as"]),
                     ([0, 1], [0, 1], "none"))
    self.assertEqual(none["eval_top1"][0], first["none"]["eval_top1"][0])  # kept, not retrained.
    self.assertEqual(linear["eval_top1"], none["eval_top1"])
    self.assertAlmostEqual(none["eval_top1_mean"], sum(none["eval_top1"]) / 2, places=6)

  def test_large_batch_cells_are_configs_validation_accepts(self):
    # Every cell of the sweep, the --grid and --quick at the default flags (--quick's warmup once
    # outlasted its 2 epochs, and the run failed at its third cell). In a process of its own:
    # the benchmark's flags must be parsed to make its cells.
    code = ("from absl import flags\n"
            "import experiment\n"
            "from benchmarks.papers import large_batch\n"
            "flags.FLAGS(['large_batch'])\n"
            "for grid, quick in ((False, False), (True, False), (False, True)):\n"
            "  for _, model, batch, rule, settings in large_batch.cells(grid=grid, quick=quick):\n"
            "    experiment.resolve(large_batch.cell_config(model, batch, rule, **settings,\n"
            "                                               seed=0))\n"
            "print('checked')\n")
    self.assertEqual(python_output(self, code).strip(), "checked")

  def test_nothing_patches_the_import_path(self):
    needle = "sys." + "path"  # spelled apart, so that this file does not match itself.
    for folder in ("benchmarks", "tests", "hybrid_parallel", "input_pipeline", "configs"):
      for directory, _, files in os.walk(os.path.join(ROOT, folder)):
        for name in files:
          if name.endswith(".py"):
            with open(os.path.join(directory, name)) as f:
              self.assertNotIn(needle, f.read(), os.path.join(directory, name))


if __name__ == "__main__":
  absltest.main()

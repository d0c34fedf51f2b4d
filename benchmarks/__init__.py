"""Benchmarks and studies, grouped by the question each answers (benchmarks/README.md maps each
question to its command, its JSON and its doc page). Each runs from the repository root as
`python -m benchmarks.GROUP.NAME` (`--help` lists its flags), prints JSON and writes its results
under runs/NAME/ (or --out=DIR), resuming from what is there; only with --publish into docs/, the
project's published results, where `python -m benchmarks.docs` renders the tables each study
declares (`TABLES`).

What every study shares is here, in the package: where its results go (`define_output_flags`),
how a result is published with its record (date, machine, software, command) and read back, and
how a table is declared (one row per item of the JSON, as its columns)."""

import datetime
import importlib.metadata
import json
import math
import os
import platform
import re
import shlex
import statistics
import sys
from collections.abc import Callable

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


# --- Results files: what was measured and the record of how -----------------------------------

# The packages every record names (a study adds what else it ran, e.g. torch).
SOFTWARE = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy")
# What a record must hold: when, on what, with which versions, made by which command.
RECORD_FIELDS = ("date", "machine", "software", "command")


def _cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:  # not Linux
    pass
  return platform.processor() or platform.machine()


def this_machine() -> str:
  """The machine this process measures on, as a reader names it: "Intel(R) Xeon(R) Processor,
  2 cores", or the accelerators JAX sees on their host ("1 × NVIDIA H100 80GB HBM3; host
  Intel(R) Xeon(R) Processor, 16 cores")."""
  import jax  # every study has imported it; the package itself need not.
  from hybrid_parallel import platforms
  host = f"{_cpu_model()}, {os.cpu_count()} cores"
  # A study that ran its work in subprocesses (table1's main.py runs) has started no backend
  # here: started as main.py starts it, a machine without a TPU does not try libtpu's (which,
  # installed, prints its failures and waits on a VM whose network card it takes for a TPU).
  platforms.start()
  devices = jax.devices()
  if devices[0].platform == "cpu":
    return host
  return f"{len(devices)} × {devices[0].device_kind}; host {host}"


def machine_in_words(machine: str) -> str:
  """A record's machine as a sentence or a table cell names it: "AMD EPYC, 2 cores, each mesh on
  simulated CPU devices" → "a 2-core AMD EPYC" (the rest stays in the record line), "shared with
  other work" kept; a machine with accelerators ("1 × NVIDIA H100 …; host …") as recorded."""
  found = re.fullmatch(r"(?P<cpu>[^;]+?), (?P<cores>\d+) cores(?P<rest>.*)", machine)
  if not found:
    return machine
  shared = " shared with other work" if "shared with other work" in found["rest"] else ""
  return f"a {found['cores']}-core {found['cpu']}{shared}"


def installed_software(extra=()) -> dict:
  """Python's version and each of SOFTWARE's and `extra`'s installed versions ("not installed"
  where one is missing)."""
  versions = {"python": platform.python_version()}
  for name in (*SOFTWARE, *extra):
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = "not installed"
  return versions


def this_command() -> str:
  """The command line this process was started with, as a user types it from the repository
  root: "python -m benchmarks.GROUP.NAME --flag=value" (paths inside the repository relative)."""
  main = sys.modules.get("__main__")
  module = getattr(getattr(main, "__spec__", None), "name", None)
  program = (["python", "-m", module] if module else
             ["python", os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)])
  return shlex.join(program + [a.replace(ROOT + os.sep, "") for a in sys.argv[1:]])


def require_extra(extra: str, modules=None) -> None:
  """Exits with one `error:` sentence naming `extra` (hybrid_parallel/extras.py) where this
  study needs packages of it (`modules`; default: all of them) that are missing: the first thing
  a study's main() does, before any work."""
  from hybrid_parallel import extras
  main = sys.modules.get("__main__")
  module = getattr(getattr(main, "__spec__", None), "name", None) or "this study"
  if error := extras.missing(f"python -m {module}", extra, modules):
    raise SystemExit(f"error: {error}")


def record(*, software=(), command: str | None = None, machine: str | None = None) -> dict:
  """The record of a result made now by this process: today's date (UTC), the machine, the
  software's versions (SOFTWARE and `software`) and the command (this process's unless given)."""
  return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
          "machine": machine or this_machine(), "software": installed_software(software),
          "command": command or this_command()}


def with_record(data, *, software=(), command: str | None = None,
                machine: str | None = None) -> dict:
  """A results file's contents: {"record": record(...), "results": data}."""
  return {"record": record(software=software, command=command, machine=machine),
          "results": data}


def load_results(path: str) -> tuple[dict, object]:
  """(record, results) of the results file at `path` (what `publish` wrote).

  Raises:
    ValueError: the file is not a results file, or its record lacks one of RECORD_FIELDS.
  """
  with open(path) as f:
    content = json.load(f)
  if not isinstance(content, dict) or set(content) != {"record", "results"}:
    raise ValueError(f"{path} is not a results file: it must be an object of exactly "
                     f"\"record\" and \"results\" (benchmarks.publish writes one).")
  missing = [k for k in RECORD_FIELDS if not content["record"].get(k)]
  if missing:
    raise ValueError(f"{path}'s record lacks {', '.join(missing)}: a record names "
                     f"{', '.join(RECORD_FIELDS)}.")
  return content["record"], content["results"]


def publish(data, path: str, *, software=(), command: str | None = None,
            machine: str | None = None) -> None:
  """Writes a study's JSON to `path` with its record (`with_record`: `software` names the
  packages it used beyond SOFTWARE, `command` and `machine` stand in for this process's); when
  that is docs/ (a study's --publish: `Output.path`), refreshes the tables made from it."""
  data = with_record(data, software=software, command=command, machine=machine)
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
  """The results in the results file at `path` (`load_results`), or `default` (a list) when
  there is none yet."""
  if not os.path.exists(path):
    return list(default)
  return load_results(path)[1]


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


def per_row(*columns, rows=lambda data: data, optional=()):
  """A table of one row per item of `rows(data)`, declared as its columns: (header, cell), the
  cell a format string over the item's keys ("{config}", "{mesh[0]}×{mesh[1]}") or a function
  of the item. A column whose header is in `optional` is left out where every cell of it is
  "—" (what reports made before it existed lack)."""
  def render(data) -> str:
    cells = [[cell(r) if callable(cell) else cell.format_map(r) for _, cell in columns]
             for r in rows(data)]
    kept = [i for i, (header, _) in enumerate(columns)
            if header not in optional or any(row[i] != "—" for row in cells)]
    return table([columns[i][0] for i in kept], ([row[i] for i in kept] for row in cells))
  return render


def mb(x: float) -> str:
  return f"{x / 1e6:.1f}"


def percent(x: float) -> str:
  return f"{100 * x:.2f}%"


def spread(key: str) -> Callable[[dict], str]:
  """The cell "median (p10–p90)" of the timing `key`."""
  return lambda r: "{median} ({p10}–{p90})".format_map(r[key])


def _traced(r) -> str:
  t = r["traced"]
  return (f"{100 * t['busy_share']:.0f}% of {t['steps']} steps "
          f"({', '.join(map(str, t['longest_gaps_ms']))})")


# The column of a main.py run's traced steps (main_runs.run_config's `traced`), "—" where the run
# traced none (rows made before 2026-11-26).
TRACED = ("device busy while traced (longest gaps ms)",
          lambda r: _traced(r) if "traced" in r else "—")


# --- Flags -------------------------------------------------------------------------------------

class Output:
  """Where a study's results go (`define_output_flags`): `folder`, and `path(NAME)` in it."""

  def __init__(self, study: str, out, publish_flag):
    self._study, self._out, self._publish = study, out, publish_flag

  @property
  def publishing(self) -> bool:
    """Whether the results go into docs/ (--publish)."""
    return self._publish.value

  @property
  def chosen(self) -> bool:
    """Whether --out or --publish names the folder (rather than the default)."""
    return self._publish.value or bool(self._out.value)

  @property
  def folder(self) -> str:
    """docs/ with --publish; else --out, or runs/STUDY/ in the repository."""
    if self._publish.value:
      return DOCS
    return self._out.value or os.path.join(ROOT, "runs", self._study)

  def path(self, name: str) -> str:
    """The file `name` in `folder`: a result written there, or read back to resume from."""
    return os.path.join(self.folder, name)


def define_output_flags(study: str, *, flag_values=flags.FLAGS) -> Output:
  """The flags --out and --publish of `study`, which say where its results go: a user's run
  writes under runs/STUDY/ (or --out=DIR) and resumes from what is there, never touching docs/
  or the README; --publish writes docs/ (and resumes from the results published there), and
  refreshes the pages' tables made from them. Both at once, or an --out inside docs/ without
  --publish, is refused while the flags are parsed."""
  out = flags.DEFINE_string(
      "out", None, f"Folder for the results (default runs/{study}/ in the repository); a "
      f"stopped run resumes from what it holds.", flag_values=flag_values)
  publish_flag = flags.DEFINE_bool(
      "publish", False, "Write the results into docs/, the project's published results, "
      "resuming from those there, and refresh the pages' tables made from them (instead of "
      "--out).", flag_values=flag_values)

  def one_destination(values) -> bool:
    if values["publish"] and values["out"]:
      raise flags.ValidationError(
          f"--out={values['out']} and --publish both say where the results go: --publish "
          f"writes docs/; give one of them.")
    if values["out"] and not values["publish"] and _inside(values["out"], DOCS):
      raise flags.ValidationError(
          f"--out={values['out']} is inside docs/, the project's published results: pass "
          f"--publish (and no --out) to write there, or choose another folder.")
    return True

  flags.register_multi_flags_validator(["out", "publish"], one_destination,
                                       flag_values=flag_values)
  return Output(study, out, publish_flag)


def _inside(path: str, folder: str) -> bool:
  path, folder = os.path.realpath(path), os.path.realpath(folder)
  return path == folder or path.startswith(folder + os.sep)


def define_choices(name: str, choices, help_text: str, *, default=None,
                   flag_values=flags.FLAGS):
  """A comma-separated list flag whose items are among `choices` (all of them by default; its
  help names them): an unknown item or an empty list is refused while the flags are parsed."""
  choices = tuple(choices)
  holder = flags.DEFINE_list(name, list(default or choices),
                             f"{help_text} Of: {', '.join(choices)}.", flag_values=flag_values)
  flags.register_validator(name, lambda chosen: bool(chosen) and set(chosen) <= set(choices),
                           message=f"--{name}: choose one or more of {', '.join(choices)}.",
                           flag_values=flag_values)
  return holder


# --- Results over seeds ------------------------------------------------------------------------

DIGITS_TEST_IMAGES = 360  # digits' test split: an accuracy p has sampling error √(p(1−p)/360).


def define_seeds_flag(default=range(3)):
  """The `--seeds` flag of a study that trains: the seeds each setting runs on (`default`: three;
  the seed sets the initialisation, the data order and dropout)."""
  holder = flags.DEFINE_list("seeds", [str(s) for s in default], "Seeds each setting trains on.")
  flags.register_validator("seeds", lambda seeds: all(s.isdigit() for s in seeds) and seeds,
                           message="--seeds: non-negative integers, at least one.")
  return holder


def seed_statistics(top1: list, *, test_images: int = DIGITS_TEST_IMAGES) -> dict:
  """The statistics of a test top-1 measured once per seed (`None` = the run diverged): the mean
  and standard deviation over the seeds that finished, how many diverged, and the sampling error
  at the mean of a test set of `test_images` (digits' by default)."""
  finished = [v for v in top1 if v is not None]
  mean = statistics.mean(finished) if finished else None
  return dict(
      eval_top1_mean=None if mean is None else round(mean, 6),
      eval_top1_sd=round(statistics.stdev(finished), 6) if len(finished) > 1 else None,
      seeds_diverged=len(top1) - len(finished),
      sampling_error=None if mean is None else round(
          math.sqrt(mean * (1 - mean) / test_images), 6))


def add_seed(setting: dict, seed: int, result: dict) -> None:
  """Appends `result` (one run of `setting` on `seed`: key → value, `eval_top1` among them) to
  `setting`'s per-seed lists (`seeds`, and one list per key) and recomputes its statistics (on
  the test set of the setting's `test_images`, digits' where it names none)."""
  setting.setdefault("seeds", []).append(seed)
  for key, value in result.items():
    setting.setdefault(key, []).append(value)
  setting.update(seed_statistics(setting["eval_top1"],
                                 test_images=setting.get("test_images", DIGITS_TEST_IMAGES)))


def over_seeds(setting: dict) -> str:
  """The cell "mean ± sd [± sampling error]" (percent) of a setting's `eval_top1` over its seeds
  ("mean [± sampling error], 1 seed" for one), naming the seeds that diverged."""
  n = len(setting["eval_top1"])
  diverged = setting["seeds_diverged"]
  if diverged == n:
    return f"NaN on {'all ' * (n > 1)}{n} seed{'s' * (n > 1)}"
  sd = "" if setting["eval_top1_sd"] is None else f" ± {100 * setting['eval_top1_sd']:.1f}"
  cell = f"{100 * setting['eval_top1_mean']:.1f}{sd} [± {100 * setting['sampling_error']:.1f}]"
  if n - diverged == 1:
    cell += ", 1 seed"
  return cell + (f" ({diverged} of {n} seeds NaN)" if diverged else "")

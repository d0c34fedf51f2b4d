"""Experiment configs: default.py and one file per experiment (its docstring: what it trains, the
command, the result to expect and what it costs). `python main.py --config=configs/NAME.py`; from
code, `configs.get(NAME)`. A config trained on data that cannot be fetched here (ImageNet)
declares the result published for its recipe as `PUBLISHED_RESULT`; one that a CPU cannot train
end to end in a sitting says why as `NOT_RUN_HERE` (benchmarks/papers/table1.py's rows)."""

import importlib
import os

# Yadan et al. 2013's Table 1 as this project's configs, and Krizhevsky 2014's owt8: the rows the
# benchmarks and the notebook compare.
TABLE1 = ("single", "data2", "data4", "model2", "hybrid4", "owt8")


def get(name: str):
  """A fresh copy of configs/NAME.py's config (a ConfigDict)."""
  return importlib.import_module(f"configs.{name}").get_config()


def names() -> list[str]:
  """Every experiment config in configs/ by name (default.py, the fields they share, is none)."""
  folder = os.path.dirname(os.path.abspath(__file__))
  return sorted(f[:-3] for f in os.listdir(folder)
                if f.endswith(".py") and f not in ("__init__.py", "default.py"))


def published_result(name: str) -> dict | None:
  """configs/NAME.py's `PUBLISHED_RESULT` (what its recipe reached where it was published:
  `dataset`, `top1`, `source`), or None for a config this project trains and measures itself."""
  return getattr(importlib.import_module(f"configs.{name}"), "PUBLISHED_RESULT", None)


def not_run_here(name: str) -> str | None:
  """configs/NAME.py's `NOT_RUN_HERE`: why a CPU does not train it end to end (a step of minutes,
  say), or None."""
  return getattr(importlib.import_module(f"configs.{name}"), "NOT_RUN_HERE", None)

"""Experiment configs: default.py and one file per experiment (its docstring: the command and the
measured result). `python main.py --config=configs/NAME.py`; from code, `configs.get(NAME)`."""

import importlib

# Yadan et al. 2013's Table 1 as this project's configs, and Krizhevsky 2014's owt8: the rows the
# benchmarks and the notebook compare.
TABLE1 = ("single", "data2", "data4", "model2", "hybrid4", "owt8")


def get(name: str):
  """A fresh copy of configs/NAME.py's config (a ConfigDict)."""
  return importlib.import_module(f"configs.{name}").get_config()

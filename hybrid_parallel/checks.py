"""The rules for one setting's value, each written once: a `Check` takes the setting's name and
its value and raises one UserError whose sentence names both and says what is allowed.

The library applies them to what it is given (`models.build`, `mesh.make_mesh`, ...), and a run's
description declares each config field with its check beside it (`setting`, read by
experiment.resolve), so that a config and a direct caller meet the same rule and the same
sentence.
"""

import dataclasses
import math
from collections.abc import Callable

from hybrid_parallel.errors import UserError

Check = Callable[[str, object], None]  # (name, value) -> None, or a UserError.


def _type(value) -> str:
  return type(value).__name__


def integer(minimum: int | None = None) -> Check:
  """An int (not a bool) of at least `minimum`."""

  def check(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
      raise UserError(f"{name} must be an integer, got {value!r} ({_type(value)}).")
    if minimum is not None and value < minimum:
      raise UserError(f"{name} must be at least {minimum}, got {value}.")

  return check


def number(*, low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False) -> Check:
  """A finite int or float within [low, high] (either end open as said)."""

  def check(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
        value):
      raise UserError(f"{name} must be a finite number, got {value!r}.")
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
      left = "(" if low_open or low is None else "["
      right = ")" if high_open or high is None else "]"
      span = f"{left}{'-∞' if low is None else low}, {'∞' if high is None else high}{right}"
      raise UserError(f"{name} must lie in {span}, got {value}.")

  return check


def boolean(name, value) -> None:
  if not isinstance(value, bool):
    raise UserError(f"{name} must be True or False, got {value!r}.")


def text(name, value) -> None:
  if not isinstance(value, str):
    raise UserError(f"{name} must be a string, got {value!r}.")


def one_of(choices) -> Check:
  """One of `choices` (listed in the sentence when it is not)."""
  choices = tuple(choices)

  def check(name, value):
    if value not in choices:
      raise UserError(f"unknown {name} {value!r}; choose one of "
                      f"{', '.join(map(str, choices))}.")

  return check


def listing(items) -> str:
  """Items as a sentence lists them: "a", "a and b", "a, b and c"."""
  items = list(items)
  return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def setting(check: Check, *, config: str | None = None,
            default=dataclasses.MISSING) -> dataclasses.Field:
  """A dataclass field that a config field sets — the one of the same name, or `config` (a
  dotted name such as "mesh.data") — and the check its value must pass; `default`: its value
  where the dataclass is built by hand without it (a config always sets it)."""
  return dataclasses.field(default=default, metadata={"check": check, "config": config})


def declared_settings(cls) -> dict[str, Check]:
  """{config field: its check} for the fields of the dataclass `cls` declared with `setting`."""
  return {f.metadata["config"] or f.name: f.metadata["check"]
          for f in dataclasses.fields(cls) if "check" in f.metadata}

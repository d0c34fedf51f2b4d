"""The one exception type for bad user input.

Everything a user can get wrong (a config field, a mesh shape, a dataset path) raises `UserError`
with one sentence that says what is wrong and how to fix it. `main.py` prints that sentence and
exits non-zero; anything else is a bug and keeps its traceback.
"""


class UserError(ValueError):
  """Bad input from the user: a config, a mesh shape, a dataset or a file."""

"""The one exception type for bad user input.

Everything a user can get wrong (a config field, a mesh shape, a dataset path) raises `UserError`
with one sentence that says what is wrong and how to fix it. `main.py` prints that sentence and
exits non-zero; anything else is a bug and keeps its traceback — except the devices running out
of memory, which is the machine's limit, not a bug: `out_of_memory` says what to change.
"""


class UserError(ValueError):
  """Bad input from the user: a config, a mesh shape, a dataset or a file."""


def out_of_memory(cause: str) -> str:
  """One sentence for a step the devices had no memory for (XLA's RESOURCE_EXHAUSTED, whose first
  line is `cause`): the ways to give it memory or to need less."""
  return (f"the devices ran out of memory ({cause.strip().splitlines()[0]}): on a GPU JAX takes "
          f"75% of its memory unless XLA_PYTHON_CLIENT_MEM_FRACTION says more (set it to 0.95 "
          f"before the command), else lower --config.global_batch_size or split each step's "
          f"batch with --config.microbatches=K (the same update, in K passes).")

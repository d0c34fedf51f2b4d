"""notebooks/colab.ipynb on a replica of Colab's CPU runtime, as a Colab user runs it. `.ci/run`
builds a Python 3.13 environment from notebooks/colab_runtimes.txt's [cpu] section (Colab's
versions: jax 0.7.2, flax 0.11.2, ...) and runs this file with it, passing Colab's own jax and
jaxlib pins (`python .ci/colab_replica.py jax==0.7.2 jaxlib==0.7.2`):

1. a fresh copy of the repository (the files a clone of it has) is the notebook's working folder,
   as after `!git clone ...` and `%cd`;
2. the notebook runs top to bottom at its default steps: every cell runs, the first installs what
   lies outside the supported ranges (Colab's JAX is not one the project runs on) and no TensorFlow,
   and the train cell's test top-1 is well above chance (LEARNED_TOP1);
3. Colab's own jax and jaxlib put back, a kernel that has imported JAX and then runs the first
   cell stops with the one-sentence advice to restart, and no traceback.

Prints what it checked; exits 1 with one line per failure.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import nbclient
import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The notebook's default run on a CPU runtime (hybrid4 narrowed, 300 steps): test top-1 0.953–0.967
# on seeds 0–3 (JAX 0.12, 2026-11-27; tests/notebook_test.py has the 150-step figures); 0.80 is
# 15 points below the lowest and 8 times chance.
LEARNED_TOP1 = 0.80
RESTART_ADVICE = "restart the session (Runtime → Restart session) and run this cell again."


def fresh_copy(destination: str) -> str:
  """The repository's tracked and untracked-but-not-ignored files, copied: what a clone holds
  (and the changes of a checkout that are not yet committed)."""
  listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          cwd=ROOT, capture_output=True, check=True).stdout.decode()
  for path in filter(None, listed.split("\0")):
    if os.path.isfile(os.path.join(ROOT, path)):
      os.makedirs(os.path.join(destination, os.path.dirname(path)), exist_ok=True)
      shutil.copy2(os.path.join(ROOT, path), os.path.join(destination, path))
  return destination


def execute(notebook, folder: str, *, allow_errors: bool = False):
  client = nbclient.NotebookClient(notebook, timeout=1800, kernel_name="python3",
                                   allow_errors=allow_errors,
                                   resources={"metadata": {"path": folder}})
  client.execute()
  return notebook


def text(cell) -> str:
  return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def tagged(notebook, tag: str):
  (cell,) = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
  return cell


def main(colab_pins: list[str]) -> int:
  """`colab_pins`: Colab's `jax==…` and `jaxlib==…`, as notebooks/colab_runtimes.txt gives them."""
  colab_jax = dict(pin.split("==") for pin in colab_pins)["jax"]
  failures = []
  with tempfile.TemporaryDirectory() as folder:
    clone = fresh_copy(os.path.join(folder, "hybrid_parallel"))
    notebook = nbformat.read(os.path.join(clone, "notebooks", "colab.ipynb"), as_version=4)
    started = time.perf_counter()
    try:
      execute(notebook, clone)
    except nbclient.exceptions.CellExecutionError as error:
      print(f"FAILED: the notebook stopped: {str(error)[-3000:]}")
      return 1
    print(f"the notebook ran top to bottom in {time.perf_counter() - started:.0f} s.")
    setup = text(tagged(notebook, "setup"))
    print(setup.strip())
    if f"jax: {colab_jax} → " not in setup:
      failures.append(f"the first cell did not install the project's JAX over Colab's "
                      f"{colab_jax}.")
    installing = [line for line in setup.splitlines() if line.startswith("installing:")]
    if any("tensorflow" in line or "grain" in line for line in installing):
      failures.append(f"the first cell installed the ImageNet packages: {installing}.")
    final = json.loads(text(tagged(notebook, "train")).strip().splitlines()[-1])
    print("train cell:", json.dumps(final))
    if final["platform"] != "cpu" or not final["eval_top1"] > LEARNED_TOP1:
      failures.append(f"the train cell reached test top-1 {final['eval_top1']:.3f} on "
                      f"{final['platform']}, not above {LEARNED_TOP1} on the CPU.")
    for tag in ("curves", "bytes"):
      if not any("image/png" in o.get("data", {}) for o in tagged(notebook, tag).outputs):
        failures.append(f"the {tag} cell drew no plot.")

    # Colab's JAX back, imported before the first cell runs: the advice to restart, and a stop.
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    *colab_pins], check=True)
    again = nbformat.v4.new_notebook(metadata=notebook.metadata, cells=[
        nbformat.v4.new_code_cell("import jax\nprint(jax.__version__)"),
        nbformat.v4.new_code_cell(tagged(notebook, "setup").source)])
    execute(again, clone, allow_errors=True)
    imported, stopped = again.cells
    errors = [o for o in stopped.outputs if o.output_type == "error"]
    print("after `import jax` (Colab's", text(imported).strip() + "):",
          [f"{e.ename}: {e.evalue}" for e in errors])
    if not (len(errors) == 1 and errors[0].ename == "SystemExit" and
            errors[0].evalue.endswith(RESTART_ADVICE) and f"jax {colab_jax}" in errors[0].evalue):
      failures.append("run after Colab's JAX was imported, the first cell did not stop with the "
                      "one-sentence restart advice.")
    elif any("Traceback" in line or "File " in line for line in errors[0].traceback):
      failures.append(f"the restart advice came with a traceback: {errors[0].traceback}")
  for failure in failures:
    print("FAILED:", failure)
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))

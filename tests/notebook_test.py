"""notebooks/colab.ipynb runs top to bottom on CPU (few steps) and shows what it promises."""

import json
import os

from absl.testing import absltest
import jax
import nbclient
import nbformat

from hybrid_parallel import models, partitioning
from hybrid_parallel.analysis import costmodel
from notebooks import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "colab.ipynb")
STEPS = 150  # the notebook's default is 300; 150 reach about 75% on CPU in ~10 s.


def _outputs(notebook, tag: str) -> list[dict]:
  (cell,) = [c for c in notebook.cells if tag in c.metadata.get("tags", [])]
  return cell.outputs


def _printed_json(outputs) -> dict:
  text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream"
                 and o.name == "stdout")
  return json.loads(text.strip().splitlines()[-1])


class NotebookTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.notebook = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["NOTEBOOK_STEPS"] = str(STEPS)  # the kernel inherits this process's environment.
    try:
      nbclient.NotebookClient(cls.notebook, timeout=600, kernel_name="python3",
                              resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()
    finally:
      del os.environ["NOTEBOOK_STEPS"]

  def test_trains_the_chosen_scheme_well_above_chance(self):
    final = _printed_json(_outputs(self.notebook, "train"))
    # This machine has no accelerator: the default multi-device scheme, narrowed, on CPU devices.
    self.assertEqual((final["config"], final["model"], final["platform"], final["steps"]),
                     ("hybrid4", "alexnet_tiny", "cpu", STEPS))
    self.assertLess(final["eval_loss"], 1.5)  # chance on 10 classes: ln 10 ≈ 2.30.
    self.assertGreater(final["eval_top1"], 0.5)

  def test_plots_the_curves_and_the_bytes(self):
    for tag in ("curves", "bytes"):
      self.assertTrue(any("image/png" in o.get("data", {}) for o in _outputs(self.notebook, tag)),
                      tag)

  def test_bytes_per_scheme_are_the_cost_model(self):
    shown = _printed_json(_outputs(self.notebook, "bytes"))
    self.assertEqual(list(shown), ["single", "data2", "data4", "model2", "hybrid4", "owt8"])
    self.assertEqual(shown["single"], {"gradients": 0.0, "activations": 0.0})
    hybrid = costmodel.traffic(models.ARCHITECTURES["alexnet"],
                               partitioning.make_plan("hybrid", 2, 2), global_batch=256,
                               image_size=224, num_classes=1000)
    self.assertEqual(shown["hybrid4"], {"gradients": hybrid.gradients,
                                        "activations": hybrid.activations})
    self.assertGreater(shown["hybrid4"]["activations"], 0)


MESHES = {"single": 1, "hybrid4": 4, "owt8": 8}


class RuntimeTest(absltest.TestCase):

  def test_the_default_run_uses_the_accelerator(self):
    gpu = runtime.choose_run(None, platform="gpu", device_count=1, mesh_devices=MESHES)
    self.assertEqual((gpu.config, gpu.platform, gpu.narrow), ("single", "gpu", False))
    self.assertEqual(gpu.overrides, {"dtype": "bfloat16", "image_size": 224})
    tpu = runtime.choose_run(None, platform="tpu", device_count=8, mesh_devices=MESHES)
    self.assertEqual((tpu.config, tpu.platform, tpu.narrow), ("hybrid4", "tpu", False))

  def test_a_mesh_the_accelerator_cannot_hold_runs_on_cpu_devices_and_says_so(self):
    run = runtime.choose_run("owt8", platform="gpu", device_count=1, mesh_devices=MESHES)
    self.assertEqual((run.config, run.platform, run.narrow), ("owt8", "cpu", True))
    self.assertEqual(run.note, "owt8 needs 8 devices and this runtime has 1 gpu device(s): it "
                     "runs on 8 simulated CPU devices, with the narrow _tiny network at 64².")

  def test_a_jax_outside_the_supported_range_is_named_in_one_sentence(self):
    for version in ("0.10.2", "0.11.2", "0.12.0.1", jax.__version__):
      self.assertIsNone(runtime.unsupported_jax(version))
    for version in ("0.10.1", "0.7.2", "0.13.0", "0.13.0.dev20261201"):
      self.assertEqual(runtime.unsupported_jax(version),
                       f"This runtime has JAX {version} and hybrid_parallel supports JAX 0.10.2 "
                       f"to 0.12.x: use a runtime with such a JAX, or install one (pip install -r "
                       f"requirements-cuda13.txt, -cuda12.txt or -tpu.txt) and restart the "
                       f"runtime.")

  def test_setup_installs_only_what_is_missing_and_never_the_runtimes_stack(self):
    with open(os.path.join(ROOT, "requirements.txt")) as f:
      requirements = f.read()
    # A runtime with nothing installed: everything but the runtime's own stack and test tools.
    everything = runtime.requirements_to_install(requirements, installed=lambda name: False)
    names = {r.split("==")[0].lower() for r in everything}
    self.assertContainsSubset({"flax", "optax", "orbax-checkpoint", "ml-collections"}, names)
    self.assertEmpty(names & {"jax", "jaxlib", "libtpu", "tensorflow-cpu", "ipykernel", "pytest",
                              "nbclient"})
    self.assertTrue(all("==" in r and ";" not in r for r in everything))  # pinned, as CI's.
    # The pins of the runtime's Python: requirements.txt's markers pick flax with the JAX.
    flax_for = {python: [r for r in runtime.requirements_to_install(
        requirements, installed=lambda name: False, python=python) if r.startswith("flax")]
                for python in ((3, 11), (3, 12), (3, 13))}
    self.assertEqual(flax_for, {(3, 11): ["flax==0.12.8"], (3, 12): ["flax==0.12.12"],
                                (3, 13): ["flax==0.12.12"]})
    # This environment (requirements.txt installed): nothing.
    self.assertEqual(runtime.requirements_to_install(requirements), [])
    command = runtime.pip_command(["flax==0.12.8"])
    self.assertIn(f"jax=={jax.__version__}", command)  # held where it is.


if __name__ == "__main__":
  absltest.main()

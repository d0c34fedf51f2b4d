"""notebooks/colab.ipynb runs top to bottom on CPU (few steps) and shows what it promises."""

import json
import os
import types

from absl.testing import absltest
import nbclient
import nbformat
from packaging.utils import canonicalize_name

from hybrid_parallel import models, partitioning
from hybrid_parallel.analysis import costmodel
from notebooks import runtime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "colab.ipynb")
# The notebook's default is 300 steps; 150 take ~10 s on 2 cores. Its CPU run (hybrid4 narrowed:
# alexnet_tiny, batch 64, rate 0.1, dropout 0.25, the rate × 0.1 after 60% of the steps) at 150
# steps, measured 2026-11-27 (AMD EPYC, 2 cores) on seeds 0–3 under JAX 0.10.2 and 0.12, each with
# AVX-512 and AVX2 code: 16 runs, test top-1 0.828–0.894, test loss 0.33–0.53 (300 steps: 0.953–
# 0.967). "Well above chance" is top-1 above 0.70 (13 points, 46 test images, below the worst run;
# chance is 0.10) and loss below 1.0 (chance: ln 10 ≈ 2.30).
STEPS = 150
LEARNED_TOP1, LEARNED_LOSS = 0.70, 1.0


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
    self.assertLess(final["eval_loss"], LEARNED_LOSS)
    self.assertGreater(final["eval_top1"], LEARNED_TOP1)

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
COLAB = os.path.join(ROOT, "notebooks", "colab_runtimes.txt")
# Colab's runtimes run Python 3.13 (notebooks/colab_runtimes.txt); the markers are read for it.
COLAB_PYTHON = {"python_version": "3.13", "python_full_version": "3.13.15"}
# jax 0.12.0.1's own requirements for its accelerator extras (its metadata, as installed).
JAX_EXTRAS = ['jaxlib<=0.12.0.1,>=0.12.0.1; extra == "cuda12"',
              'jax-cuda12-plugin[with-cuda]<=0.12.0.1,>=0.12.0.1; extra == "cuda12"',
              'jaxlib<=0.12.0.1,>=0.12.0.1; extra == "tpu"', 'libtpu==0.0.50.*; extra == "tpu"']
# What every Colab runtime installs: its packages that differ from the pins, and those it lacks.
EVERY_RUNTIME = {"jax==0.12.0.1", "jaxlib==0.12.0.1", "flax==0.12.12", "orbax-checkpoint==0.12.8",
                 "ml-collections==1.1.0", "array-record==0.8.6", "pillow==13.0.0",
                 "simplejpeg==1.9.0", "importlib-resources==7.1.0", "absl-py==2.5.1",
                 "numpy==2.4.6", "scikit-learn==1.9.1", "tensorboardx==2.6.5",
                 "matplotlib==3.11.2"}


def colab_plan(accelerator: str, **changed):
  """The notebook's install plan on Colab's `accelerator` runtime, its versions `changed`."""
  versions = {**runtime.colab_runtime(COLAB, accelerator), **changed}
  return runtime.plan_install(ROOT, accelerator, version=versions.get,
                              requires=lambda name: JAX_EXTRAS if name == "jax" else [],
                              environment=COLAB_PYTHON)


class InstallerTest(absltest.TestCase):
  """The first cell's decisions on Colab's three runtimes (their package sets recorded in
  notebooks/colab_runtimes.txt), without installing anything."""

  def test_a_cpu_runtime_gets_requirements_txt_tensorflow_replaced_in_place(self):
    plan = colab_plan("cpu")
    self.assertEqual(plan.requirements_file, "requirements.txt")
    # Colab's full tensorflow 2.20 is brought to the pin as itself: tensorflow-cpu beside it would
    # write a second distribution over its files.
    self.assertEqual(set(plan.install), EVERY_RUNTIME | {"tensorflow==2.21.0"})
    self.assertIn("jax: 0.7.2 → 0.12.0.1", plan.changes)
    self.assertIn("ml-collections: none → 1.1.0", plan.changes)
    # Left as Colab ships them: its versions are the pins.
    self.assertEqual(set(plan.met), {"optax", "tensorflow-datasets", "grain"})

  def test_a_gpu_runtime_gets_jax_s_cuda12_build(self):
    plan = colab_plan("gpu")
    self.assertEqual(plan.requirements_file, "requirements-cuda12.txt")
    self.assertEqual(set(plan.install),
                     EVERY_RUNTIME | {"tensorflow==2.21.0", "jax[cuda12]==0.12.0.1"})

  def test_a_tpu_runtime_gets_jax_s_tpu_build_and_tensorflow_cpu(self):
    plan = colab_plan("tpu")  # no TensorFlow on Colab's TPU runtime.
    self.assertEqual(plan.requirements_file, "requirements-tpu.txt")
    self.assertEqual(set(plan.install),
                     EVERY_RUNTIME | {"tensorflow-cpu==2.21.0", "jax[tpu]==0.12.0.1"})

  def test_pins_met_by_version_install_nothing_and_an_extra_is_judged_by_its_plugin(self):
    pinned = {canonicalize_name(r.name): runtime.pinned_version(r) for r in runtime.pins(
        os.path.join(ROOT, "requirements.txt"), environment=COLAB_PYTHON)}
    done = {**pinned, "tensorflow": pinned["tensorflow-cpu"], "tensorflow-cpu": None}
    self.assertEqual(colab_plan("cpu", **done).install, ())
    # jax at its pin but its CUDA plugin still Colab's: jax[cuda12] is not met.
    self.assertEqual(colab_plan("gpu", **done).install, ("jax[cuda12]==0.12.0.1",))
    self.assertEqual(colab_plan("gpu", **done, **{"jax-cuda12-plugin": "0.12.0.1"}).install, ())
    # An older Colab runtime (2026.07: Python 3.12, the same JAX) gets the same pins.
    versions = runtime.colab_runtime(COLAB, "cpu")
    older = runtime.plan_install(ROOT, "cpu", version=versions.get, requires=lambda name: [],
                                 environment={"python_version": "3.12"})
    self.assertEqual(older.install, colab_plan("cpu").install)

  def test_this_environment_meets_its_own_pins(self):
    # The suite's environment was built from requirements.txt: nothing to install.
    self.assertEqual(runtime.plan_install(ROOT, "cpu").install, ())

  def test_a_module_imported_at_another_version_asks_for_a_restart_in_one_sentence(self):
    jax_module = types.SimpleNamespace(__version__="0.7.2")
    installed = {"jax": "0.12.0.1", "numpy": "2.4.6"}
    advice = runtime.restart_needed(["jax", "numpy"], modules={"jax": jax_module},
                                    version=installed.get,
                                    top_levels={"jax": ["jax"], "numpy": ["numpy"]})
    self.assertEqual(advice, "This session runs jax 0.7.2 (installed: 0.12.0.1), imported before "
                     "the project's versions were installed: restart the session (Runtime → "
                     "Restart session) and run this cell again.")
    # A module at the installed version, or one not imported, needs none.
    self.assertIsNone(runtime.restart_needed(
        ["jax"], modules={"jax": types.SimpleNamespace(__version__="0.12.0.1")},
        version=installed.get, top_levels={"jax": ["jax"]}))

  def test_the_runtime_s_accelerator_is_found_as_jax_finds_it(self):
    probe = lambda tpus, gpu: types.SimpleNamespace(google_tpu_chips=lambda: tpus,
                                                    nvidia_gpu=lambda: gpu)
    self.assertEqual([runtime.accelerator(probe(t, g)) for t, g in ((1, False), (0, True),
                                                                    (0, False))],
                     ["tpu", "gpu", "cpu"])


class RuntimeTest(absltest.TestCase):

  def test_the_default_run_uses_the_accelerator(self):
    gpu = runtime.choose_run(None, platform="gpu", device_count=1, mesh_devices=MESHES,
                             compute_capability="9.0")
    self.assertEqual((gpu.config, gpu.platform, gpu.narrow), ("single", "gpu", False))
    self.assertEqual(gpu.overrides, {"dtype": "bfloat16", "image_size": 224})
    # Colab's TPU is one chip (v5e-1): the single-device scheme on it.
    tpu = runtime.choose_run(None, platform="tpu", device_count=1, mesh_devices=MESHES)
    self.assertEqual((tpu.config, tpu.platform, tpu.overrides["dtype"]),
                     ("single", "tpu", "bfloat16"))
    kaggle = runtime.choose_run(None, platform="tpu", device_count=8, mesh_devices=MESHES)
    self.assertEqual((kaggle.config, kaggle.platform), ("hybrid4", "tpu"))

  def test_a_gpu_without_bfloat16_units_trains_in_float32_and_says_so(self):
    t4 = runtime.choose_run(None, platform="gpu", device_count=1, mesh_devices=MESHES,
                            compute_capability="7.5")
    self.assertEqual(t4.overrides, {"dtype": "float32", "image_size": 224})
    self.assertEqual(t4.note, "single: 1 of this runtime's 1 gpu device(s), 224² inputs, float32 "
                     "(compute capability 7.5 has no bfloat16 units).")
    a100 = runtime.choose_run(None, platform="gpu", device_count=1, mesh_devices=MESHES,
                              compute_capability="8.0")
    self.assertEqual(a100.overrides["dtype"], "bfloat16")

  def test_a_mesh_the_accelerator_cannot_hold_runs_on_cpu_devices_and_says_so(self):
    run = runtime.choose_run("owt8", platform="tpu", device_count=1, mesh_devices=MESHES)
    self.assertEqual((run.config, run.platform, run.narrow), ("owt8", "cpu", True))
    self.assertEqual(run.note, "owt8 needs 8 devices and this runtime has 1 tpu device(s): it "
                     "runs on 8 simulated CPU devices, with the narrow _tiny network at 64².")


if __name__ == "__main__":
  absltest.main()

"""notebooks/colab.ipynb runs top to bottom on CPU (few steps) and shows what it promises."""

import json
import os

from absl.testing import absltest
import nbclient
import nbformat

from hybrid_parallel import models, partitioning
from hybrid_parallel.analysis import costmodel

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
    self.assertEqual((final["config"], final["model"], final["steps"]),
                     ("hybrid4", "alexnet_tiny", STEPS))
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
                               partitioning.make_plan("hybrid", 2, 2), 256, 224, 1000)
    self.assertEqual(shown["hybrid4"], {"gradients": hybrid.gradients,
                                        "activations": hybrid.activations})
    self.assertGreater(shown["hybrid4"]["activations"], 0)


if __name__ == "__main__":
  absltest.main()

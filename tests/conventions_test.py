"""DESIGN.md's code conventions that a machine can check: factories take at most three essentials
positionally, everything else keyword-only; anything deprecated fails the suite; the scopes the
suite schedules first (tests/conftest.py) exist."""

import ast
import importlib
import os
import warnings

from absl.testing import absltest

from tests import conftest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Code a user calls: the library, the input pipeline, the entry modules, configs and benchmarks.
FOLDERS = ("hybrid_parallel", "input_pipeline", "configs", "benchmarks")


def project_files():
  files = [os.path.join(ROOT, f) for f in os.listdir(ROOT) if f.endswith(".py")]
  for folder in FOLDERS:
    for directory, _, names in os.walk(os.path.join(ROOT, folder)):
      files += [os.path.join(directory, n) for n in names if n.endswith(".py")]
  return sorted(files)


def public_functions(tree: ast.Module):
  """Module-level functions and the methods of module-level classes whose names are public
  (closures handed to jax.shard_map and the like are called positionally by JAX)."""
  for node in tree.body:
    if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
      yield node.name, node
    if isinstance(node, ast.ClassDef):
      for item in node.body:
        if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
          yield f"{node.name}.{item.name}", item


class ConventionsTest(absltest.TestCase):

  def test_a_deprecation_fails_the_suite(self):
    # pyproject.toml's filterwarnings: what JAX, Flax, optax or orbax deprecate is an error here,
    # so the suite fails on the release that deprecates something the project uses.
    with self.assertRaises(DeprecationWarning):
      warnings.warn("deprecated", DeprecationWarning, stacklevel=1)

  def test_at_most_three_positional_parameters(self):
    offenders = []
    for path in project_files():
      with open(path) as f:
        tree = ast.parse(f.read())
      for name, function in public_functions(tree):
        positional = [a.arg for a in function.args.posonlyargs + function.args.args
                      if a.arg not in ("self", "cls")]
        if len(positional) > 3:
          offenders.append(f"{os.path.relpath(path, ROOT)}:{function.lineno} {name}"
                           f"({', '.join(positional)})")
    self.assertEqual(offenders, [], "make the parameters after the third keyword-only")


class SuiteOrderTest(absltest.TestCase):

  def test_the_longest_scopes_name_test_classes_and_go_first(self):
    # A renamed or deleted class would leave its name in conftest.LONGEST_FIRST, silently
    # scheduled nowhere: each name is a module's test class.
    self.assertNotEmpty(conftest.LONGEST_FIRST)
    for scope in conftest.LONGEST_FIRST:
      path, name = scope.split("::")
      module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
      self.assertTrue(isinstance(getattr(module, name, None), type), scope)

    class Item:
      def __init__(self, nodeid):
        self.nodeid = nodeid

    last, first = "tests/a_test.py::A::test_x", f"{conftest.LONGEST_FIRST[0]}::test_y"
    items = [Item(last), Item(first)]
    conftest.pytest_collection_modifyitems(items)
    self.assertEqual([item.nodeid for item in items], [first, last])


if __name__ == "__main__":
  absltest.main()

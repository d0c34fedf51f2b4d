"""THE table: parallelism scheme → how every parameter, optimiser slot and batch is split.

A `Plan` says, for one scheme on one mesh:
  * the model `Layout` (what each device computes),
  * the PartitionSpec of every parameter (`param_specs`) and of the batch (`batch_spec`),
  * the mesh axes over which each parameter's gradient is summed (`grad_axes`): exactly the
    axes over which that layer's *batch* is split.

Scheme by scheme (mesh data × model; D, M the axis sizes):

  single  1×1  everything whole on one device.
  data    D×1  batch over "data"; parameters replicated; all gradients summed over "data".
  model   1×M  batch replicated; conv filters and FC neurons split over "model"; no gradient sum.
  hybrid  D×M  batch over "data"; filters / neurons over "model"; gradients summed over "data".
  owt     D×M  conv stages: batch over ("data", "model"), conv parameters replicated, their
               gradients summed over both axes; FC stages: batch over "data", neurons over
               "model", gradients summed over "data" (Krizhevsky 2014).
  averaging, asgd
          D×1  batch over "data"; each replica keeps its own parameters (stacked over "data",
               see local_sgd/core.py); no gradient sum: replicas meet by averaging or at a
               parameter server.
"""

import dataclasses

import jax
from jax.sharding import PartitionSpec as P

from hybrid_parallel import checks
from hybrid_parallel.errors import UserError
from hybrid_parallel.mesh import DATA, MODEL
from hybrid_parallel.models import Layout


@dataclasses.dataclass(frozen=True)
class Rule:
  """A scheme, declared once: the meshes it takes and how it splits the batch.

  Attributes:
    mesh: which mesh shapes fit ("1×1", "D×1", "1×M" or "D×M").
    conv_batch_over_model: the conv stages split the batch over "model" too (Krizhevsky 2014's
      one weird trick: convs replicated, FC layers split).
    local_sgd: its replicas keep their own parameters and meet now and then (local_sgd/), where
      the others compute one synchronous SGD step.
  """
  mesh: str
  conv_batch_over_model: bool = False
  local_sgd: bool = False


# Every scheme, by name: the registry the config's `parallelism` is looked up in.
SCHEMES = {"single": Rule("1×1"), "data": Rule("D×1"), "model": Rule("1×M"),
           "hybrid": Rule("D×M"), "owt": Rule("D×M", conv_batch_over_model=True),
           "averaging": Rule("D×1", local_sgd=True), "asgd": Rule("D×1", local_sgd=True)}
SYNCHRONOUS = tuple(name for name, rule in SCHEMES.items() if not rule.local_sgd)
_FITS = {"1×1": lambda data, model: data == model == 1, "D×1": lambda data, model: model == 1,
         "1×M": lambda data, model: data == 1, "D×M": lambda data, model: True}
_NEEDS = {"1×1": "a 1×1 mesh", "D×1": "mesh.model = 1", "1×M": "mesh.data = 1"}


@dataclasses.dataclass(frozen=True)
class Plan:
  """How one scheme splits the model and the batch on a `data × model` mesh."""
  scheme: str
  data: int
  model: int
  layout: Layout
  conv_batch_axes: tuple[str, ...]  # mesh axes the conv stages split the batch over.
  fc_batch_axes: tuple[str, ...]  # mesh axes the FC stages split the batch over.

  @property
  def batch_spec(self) -> P:
    """PartitionSpec of a batch's leading axis as it enters the step."""
    return P(self.conv_batch_axes) if self.conv_batch_axes else P()

  @property
  def local_sgd(self) -> bool:
    """Whether the scheme's replicas keep their own state (`Rule.local_sgd`)."""
    return SCHEMES[self.scheme].local_sgd

  @property
  def batch_divisor(self) -> int:
    """The number of devices the global batch is split across."""
    return self.data * (self.model if MODEL in self.conv_batch_axes else 1)


def make_plan(scheme: str, data: int, model: int) -> Plan:
  """The plan of `scheme` on a `data × model` mesh; one clear UserError if they do not fit."""
  checks.one_of(SCHEMES)("parallelism", scheme)
  rule = SCHEMES[scheme]
  if not _FITS[rule.mesh](data, model):
    raise UserError(f"parallelism {scheme!r} needs {_NEEDS[rule.mesh]}, got a {data}×{model} "
                    f"mesh.")
  data_axes = (DATA,) if data > 1 else ()
  model_axes = (MODEL,) if model > 1 else ()
  if rule.conv_batch_over_model:
    return Plan(scheme, data, model, Layout(fc_shards=model, conv_batch_over_model=model > 1,
                                            conv_batch_axes=data_axes + model_axes),
                conv_batch_axes=data_axes + model_axes, fc_batch_axes=data_axes)
  return Plan(scheme, data, model, Layout(conv_shards=model, fc_shards=model,
                                          conv_batch_axes=data_axes),
              conv_batch_axes=data_axes, fc_batch_axes=data_axes)


def check_batch(plan: Plan, global_batch: int, *, what: str = "global_batch_size",
                microbatches: int = 1) -> None:
  """Raises a UserError unless the batch splits evenly over the plan's batch axes (and each
  device's share into `microbatches` slices)."""
  checks.integer(1)("microbatches", microbatches)
  if global_batch < 1 or global_batch % plan.batch_divisor:
    raise UserError(f"{what} {global_batch} cannot be split evenly over the "
                    f"{plan.batch_divisor} devices that share the batch in scheme "
                    f"{plan.scheme!r} ({plan.data}×{plan.model}); use a multiple of "
                    f"{plan.batch_divisor}.")
  if global_batch // plan.batch_divisor % microbatches:
    raise UserError(f"each device's {global_batch // plan.batch_divisor} examples cannot be "
                    f"split into {microbatches} microbatches; use a {what} that is a multiple of "
                    f"{plan.batch_divisor * microbatches}.")


def _is_conv(path: tuple[str, ...]) -> bool:
  # Every layer but the FC ones ("fc6", "fc8"; a ResNet's "fc"): the conv layers, their batch
  # norms ("conv1_bn"), a ResNet's blocks ("conv2_1") and its input and final batch norms.
  return not path[0].startswith("fc")


# Layers of the conv stages that no scheme splits over "model": a ResNet's input batch norm
# normalises the image's channels, which every model device holds whole.
_WHOLE_LAYERS = ("input_bn",)


def layer_group(path) -> str:
  """"conv" or "fc": the group of the parameter at `path` (for per-group learning rates)."""
  return "conv" if _is_conv(_param_keys(path)) else "fc"


def sharded_axes(plan: Plan, classifier: str):
  """`(path, leaf) -> axes`: the mesh axes a parameter is split over (its shards make the whole)."""

  def axes(path, leaf) -> tuple[str, ...]:
    spec = _spec(_param_keys(path), len(leaf.shape), plan, classifier)
    return tuple(a for entry in spec if entry
                 for a in ((entry,) if isinstance(entry, str) else entry))

  return axes


def _is_classifier(path: tuple[str, ...], classifier: str) -> bool:
  return path[0] == classifier


def _spec(path: tuple[str, ...], ndim: int, plan: Plan, classifier: str) -> P:
  is_bias = ndim == 1
  if _is_conv(path):
    if plan.layout.conv_shards == 1 or path[0] in _WHOLE_LAYERS:
      return P()  # conv kernel[H, W, I, O] / bias[O]: whole on every device.
    return P(MODEL) if is_bias else P(None, None, None, MODEL)  # filters O split over "model".
  if plan.layout.fc_shards == 1:
    return P()  # dense kernel[I, O] / bias[O]: whole.
  if _is_classifier(path, classifier):
    return P() if is_bias else P(MODEL, None)  # classifier kernel[I, C]: input rows split.
  return P(MODEL) if is_bias else P(None, MODEL)  # hidden FC kernel[I, O]: neurons O split.


def _keys(path) -> tuple[str, ...]:
  return tuple(str(getattr(k, "key", getattr(k, "name", k))) for k in path)


def _param_keys(path) -> tuple[str, ...]:
  """The layer/param names of a parameter path, without the leading "params" collection."""
  keys = _keys(path)
  return keys[1:] if keys and keys[0] == "params" else keys


def param_specs(params, plan: Plan, classifier: str):
  """The PartitionSpec of every parameter (a tree like `params`; leaves may be shape structs)."""
  return jax.tree.map_with_path(
      lambda path, p: _spec(_param_keys(path), len(p.shape), plan, classifier), params)


def grad_axes(path, plan: Plan) -> tuple[str, ...]:
  """The mesh axes the gradient of the parameter at `path` is summed over."""
  return plan.conv_batch_axes if _is_conv(_param_keys(path)) else plan.fc_batch_axes


def map_with_grad_axes(fn, tree, plan: Plan):
  """Applies `fn(leaf, axes)` to every parameter-shaped leaf, `axes` being its `grad_axes`."""
  return jax.tree.map_with_path(lambda path, x: fn(x, grad_axes(path, plan)), tree,
                                          is_leaf=lambda x: isinstance(x, P))


def partial_grad_specs(param_specs_, plan: Plan):
  """Specs of per-device partial gradients, stacked on a new leading axis over their grad axes.

  A gradient whose parameter is `kernel[I, O]` with spec P(None, "model") and grad axes ("data",)
  is carried as `[D, I, O]` with spec P("data", None, "model"): each device's partial sum is its
  own row, so no communication happens until the chosen algorithm sums the rows.
  """
  return map_with_grad_axes(lambda spec, axes: P(axes, *spec) if axes else spec, param_specs_,
                            plan)

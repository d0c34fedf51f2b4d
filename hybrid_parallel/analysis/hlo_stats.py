"""Collective traffic of a compiled XLA program, read from its HLO text.

For every collective instruction (all-reduce, all-gather, reduce-scatter, collective-permute,
all-to-all, and their async `-start` forms) we read the result shape and the device groups, and
count what one device sends under the bandwidth-optimal algorithm for that collective (p devices
in the group, n the bytes of the result on one device):

  all-reduce          2(p−1)/p · n bytes in 2(p−1) messages (ring: reduce-scatter + all-gather)
  all-gather          (p−1)/p · n bytes in p−1 messages (n is the gathered result)
  reduce-scatter      (p−1) · n bytes in p−1 messages (n is the scattered result, 1/p of the input)
  all-to-all          (p−1)/p · n bytes in p−1 messages
  collective-permute  n bytes in 1 message for every device that is a source of a pair

`bytes_per_device` and `messages_per_device` are means over the program's devices;
`busiest_device_bytes` is the most any one device sends, which is what a parameter server's root
or a tree's inner nodes are limited by (a permute counts only for its source devices). An
instruction inside a conditional branch is counted as if it ran. This is the traffic the program
asks for; what the runtime moves can differ (XLA:CPU runs an all-reduce as it likes, NCCL picks
ring or tree).

TPU programs write some reduce-scatters as a fusion whose computation (named `all-reduce-scatter`)
holds an all-reduce of the whole (padded) input followed by the slice of this core: that
all-reduce is counted as the reduce-scatter it is, its result being the input ÷ p.
"""

import dataclasses
import math
import re

import numpy as np

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f16": 2, "bf16": 2, "s16": 2, "u16": 2, "f32": 4,
          "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16}
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<shape>\(.*?\)|\S+)\s+"
    r"(?P<kind>all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)"
    r"(?P<start>-start)?\(")
_ARRAY = re.compile(r"(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")
# The header of a computation: `[ENTRY] %name (params...) -> shape {`.
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*\(.*\)\s*->.*\{\s*$")
_FUSED_REDUCE_SCATTER = "all-reduce-scatter"  # TPU's fused reduce-scatter (module docstring).


@dataclasses.dataclass
class KindStats:
  """Totals for one collective kind, per device and step."""
  ops: int = 0
  payload_bytes: float = 0.0  # bytes of the results on one device, summed over instructions
  bytes_per_device: float = 0.0  # mean bytes a device sends (bandwidth-optimal; see module doc)
  messages_per_device: float = 0.0
  busiest_device_bytes: float = 0.0  # the most bytes any one device sends


def shape_bytes(shape: str) -> int:
  """Bytes of an HLO shape such as `f32[8,16]{1,0}` or a tuple of them."""
  total = 0
  for m in _ARRAY.finditer(shape):
    if m.group("dtype") not in _BYTES:
      continue
    count = 1
    for d in filter(None, m.group("dims").split(",")):
      count *= int(d)
    total += count * _BYTES[m.group("dtype")]
  return total


def device_groups(line: str, num_devices: int) -> list[list[int]]:
  """The device groups of a collective instruction's `replica_groups`, in any of XLA's forms."""
  explicit = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", line)
  if explicit and explicit.group(1):
    return [[int(d) for d in filter(None, g.split(","))]
            for g in re.findall(r"\{([\d,]*)\}", explicit.group(1))]
  # [groups,size]<=[dims]T(perm): the device ids iota(dims), transposed, in rows of `size`.
  iota = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", line)
  if iota:
    ids = np.arange(num_devices).reshape([int(d) for d in iota.group(3).split(",")])
    if iota.group(4):
      ids = ids.transpose([int(d) for d in iota.group(4).split(",")])
    return ids.reshape(int(iota.group(1)), int(iota.group(2))).tolist()
  # XLA since JAX 0.11 names the mesh and the axes a group spans:
  # `replica_groups=mesh['data'=2,'model'=4] {'model'}` (groups of 4 along "model").
  named = re.search(r"replica_groups=mesh\[(?P<mesh>[^\]]*)\]\s*\{(?P<axes>[^}]*)\}", line)
  if named:
    axes = re.findall(r"'([^']+)'=(\d+)", named["mesh"])
    spanned = re.findall(r"'([^']+)'", named["axes"])
    ids = np.arange(math.prod(int(size) for _, size in axes)).reshape(
        [int(size) for _, size in axes])
    order = ([i for i, (name, _) in enumerate(axes) if name not in spanned] +
             [[name for name, _ in axes].index(name) for name in spanned])
    size = math.prod(int(dict(axes)[name]) for name in spanned)
    return ids.transpose(order).reshape(-1, size).tolist()
  return [list(range(num_devices))]  # no groups: every device takes part


def _pairs(line: str) -> list[list[int]]:
  """A collective-permute's [source, target] pairs."""
  pairs = re.search(r"source_target_pairs=\{(.*?)\}\}", line)
  return ([[int(a), int(b)] for a, b in re.findall(r"\{(\d+),(\d+)", pairs.group(1) + "}")]
          if pairs else [])


def _async_result(shape: str) -> str:
  """The result half of an async start's tuple `(operands..., results...[, contexts])`. TPU v5e
  and v6e's collective-permute-start ends with two u32[] context scalars, which are neither."""
  parts = re.findall(r"[a-z]+\d*\[[\d,]*\]", shape)
  while parts and parts[-1] == "u32[]":
    parts.pop()
  return " ".join(parts[len(parts) // 2:])


@dataclasses.dataclass
class Collective:
  """One collective instruction of a program and what it sends (module docstring)."""
  kind: str
  name: str  # the instruction (an async collective's start)
  result_bytes: float  # n: its result on one device
  members: list[list[int]]  # its device groups, or a permute's [source, target] pairs
  sent: list[float]  # bytes each device sends
  messages: float  # messages a device sends, on average


def collectives(hlo_text: str, num_devices: int) -> list[Collective]:
  """Every collective instruction of `hlo_text`, in program order (see the module docstring)."""
  found = []
  computation = ""
  for line in hlo_text.splitlines():
    header = _COMPUTATION.match(line)
    if header:
      computation = header.group("name")
      continue
    m = _INSTRUCTION.match(line)
    if not m:
      continue
    kind, shape = m.group("kind"), m.group("shape")
    if m.group("start") and shape.startswith("("):
      shape = _async_result(shape)
    n = shape_bytes(shape)
    name = re.match(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)", line).group(1)
    if kind == "collective-permute":
      pairs = _pairs(line)
      sent = [0.0] * num_devices
      for source, _ in pairs:
        sent[source] += n
      found.append(Collective(kind, name, n, pairs, sent, len(pairs) / num_devices))
      continue
    groups = device_groups(line, num_devices)
    if kind == "all-reduce" and computation.startswith(_FUSED_REDUCE_SCATTER):
      kind = "reduce-scatter"
      n /= len(groups[0])
    p = len(groups[0])
    per_device, messages = ({"all-reduce": (2 * (p - 1) / p * n, 2 * (p - 1)),
                             "all-gather": ((p - 1) / p * n, p - 1),
                             "reduce-scatter": ((p - 1) * n, p - 1),
                             "all-to-all": ((p - 1) / p * n, p - 1)}[kind] if p > 1 else (0, 0))
    found.append(Collective(kind, name, n, groups, [per_device] * num_devices, messages))
  return found


def _scan(hlo_text: str, num_devices: int):
  """(per-kind stats, per-kind list of the bytes each device sends)."""
  stats = {kind: KindStats() for kind in KINDS}
  sent = {kind: [0.0] * num_devices for kind in KINDS}
  for op in collectives(hlo_text, num_devices):
    s = stats[op.kind]
    s.ops += 1
    s.payload_bytes += op.result_bytes
    s.bytes_per_device += sum(op.sent) / num_devices
    s.messages_per_device += op.messages
    sent[op.kind] = [total + b for total, b in zip(sent[op.kind], op.sent)]
  for kind, s in stats.items():
    s.busiest_device_bytes = max(sent[kind])
  return stats, sent


def collective_stats(hlo_text: str, num_devices: int) -> dict[str, KindStats]:
  """Per-kind traffic of one execution of the program in `hlo_text` (see the module docstring)."""
  return _scan(hlo_text, num_devices)[0]


def busiest_device_bytes(hlo_text: str, num_devices: int) -> float:
  """The most bytes any one device sends, all kinds together."""
  sent = _scan(hlo_text, num_devices)[1]
  return max(sum(per_kind[d] for per_kind in sent.values()) for d in range(num_devices))


# An instruction line: `[ROOT] %name = shape opcode(operands), attributes`.
_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\(.*?\)|\S+)\s+"
                   r"(?P<op>[\w\-]+)\((?P<operands>.*)$")
_COMPUTE_OPS = ("fusion", "convolution", "custom-call", "dot")
# A step's bulk: convolutions and matrix products, as XLA writes them or as the library calls
# (cuDNN, cuBLAS) it hands them to on a GPU. An elementwise fusion in flight hides little.
_HEAVY_CALL = re.compile(r'custom_call_target="[^"]*(conv|gemm|matmul|cublas|cudnn)[^"]*"', re.I)
# And XLA:GPU's own GEMM kernels: a fusion whose backend config names a Triton GEMM (JAX 0.12
# writes the FC layers' products as `"kind":"__triton_nested_gemm_fusion"`) or a cuDNN fusion.
# Other kinds (a CUTLASS `__custom_fusion`, say) count as light: none appears in these programs
# under JAX 0.12, and a new one would show as a collective newly exposed in gpu_compile's rows.
_HEAVY_FUSION = re.compile(r'"kind":"(__triton\w*gemm\w*|__cudnn\$fusion)"')


@dataclasses.dataclass
class AsyncCollective:
  """One asynchronous collective of a scheduled program and what runs while it is in flight."""
  kind: str  # e.g. "all-reduce"
  name: str  # its start instruction
  bytes: int  # of its result on one device
  compute_ops_in_flight: int  # fusions, convolutions, library calls between its start and done
  heavy_ops_in_flight: int = 0  # of those, convolutions and matrix products


def async_collectives(hlo_text: str) -> list[AsyncCollective]:
  """The asynchronous collectives (`*-start` … `*-done` pairs) of a compiled, scheduled program.

  In a scheduled module the instruction order of each computation is the execution order, so the
  compute instructions between a collective's start and its done are what may overlap its
  transfer (XLA:GPU's latency-hiding scheduler places them). A collective that XLA runs
  synchronously (XLA:CPU's are) does not appear.
  """
  found = []
  computations = re.split(r"\n(?=\S)", hlo_text)  # a computation starts at column 0.
  for computation in computations:
    lines = [m for m in map(_LINE.match, computation.splitlines()) if m]
    for i, start in enumerate(lines):
      op = start.group("op")
      if not op.endswith("-start"):
        continue
      kind = op[:-len("-start")]
      if kind == "async":  # a wrapped collective: async-start(...), calls=%reduce-scatter...
        wrapped = re.search(r"calls=%?([\w.\-]+)", start.group("operands"))
        kind = next((k for k in KINDS if wrapped and k in wrapped.group(1)), "async")
      if kind not in KINDS:
        continue
      name = start.group("name")
      in_flight = heavy = 0
      for later in lines[i + 1:]:
        if later.group("op").endswith("-done") and re.search(
            rf"%{re.escape(name)}\b", later.group("operands")):
          break
        in_flight += later.group("op") in _COMPUTE_OPS
        heavy += (later.group("op") in ("convolution", "dot") or
                  bool(later.group("op") == "custom-call" and
                       _HEAVY_CALL.search(later.group("operands"))) or
                  bool(later.group("op") == "fusion" and
                       _HEAVY_FUSION.search(later.group("operands"))))
      shape = start.group("shape")
      if shape.startswith("("):  # (operands..., results...): the result half.
        parts = re.findall(r"[a-z]+\d*\[[\d,]*\]", shape)
        shape = " ".join(parts[len(parts) // 2:])
      found.append(AsyncCollective(kind, name, shape_bytes(shape), in_flight, heavy))
  return found


def overlapped(hlo_text: str) -> set[str]:
  """The names of the collectives whose transfer the schedule runs beside a convolution or a
  matrix product: those a time model may hide behind the step's compute. One beside elementwise
  fusions alone (an optimizer's update, an average) is exposed: they last microseconds, a
  gradient's transfer a millisecond (data 8×1's 151 MB fc6 all-reduce on XLA:GPU runs beside
  44 such fusions and nothing else)."""
  return {c.name for c in async_collectives(hlo_text) if c.heavy_ops_in_flight > 0}

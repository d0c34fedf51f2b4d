"""The tables of what moves between devices (docs/communication.md, README), from
comm_volume.json (benchmarks/communication/comm_volume.py)."""

from collections.abc import Callable

from benchmarks import mb, per_row

_MESH = ("mesh", "{mesh[0]}×{mesh[1]}")

# comm_volume.py --all measures this config with each algorithm.
COMM_VOLUME_ALGORITHMS_CONFIG = "data4"


def _sent(kind: str) -> Callable[[dict], str]:
  """The cell "MB (ops)" of one kind of collective in a comm_volume row."""
  return lambda r: (f"{mb(r['hlo'][kind]['bytes_per_device'])} ({r['hlo'][kind]['ops']})"
                    if kind in r["hlo"] else "—")


def _minimum(r) -> str:
  a = r["analytic_bytes_per_device"]
  return f"{mb(a['total'])} ({mb(a['gradients'])} + {mb(a['activations'])})"


# Bytes per device from the compiled HLO beside the analytic minimum (psum rows).
comm_volume = per_row(
    ("config", lambda r: r["config"] + (f" ({r['owt_variant']})"
                                        if r.get("owt_variant", "a") != "a" else "")),
    _MESH, ("batch", "{global_batch}"), ("all-reduce MB (ops)", _sent("all-reduce")),
    ("all-gather", _sent("all-gather")), ("reduce-scatter", _sent("reduce-scatter")),
    ("collective-permute", _sent("collective-permute")),
    ("HLO total MB", lambda r: mb(r["hlo_bytes_per_device"])),
    ("analytic minimum MB (gradients + activations)", _minimum),
    rows=lambda rows: [r for r in rows if r["grad_reduce"] == "psum"
                       and "analytic_bytes_per_meeting" not in r])

# data4's gradient all-reduce by each algorithm: mean and busiest device.
comm_volume_algorithms = per_row(
    ("`grad_reduce`", "`{grad_reduce}`"),
    ("HLO collectives", lambda r: ", ".join(f"{s['ops']} {kind}" for kind, s in r["hlo"].items())),
    ("mean MB sent per device", lambda r: mb(r["hlo_bytes_per_device"])),
    ("busiest device MB", lambda r: mb(r["hlo_busiest_device_bytes"])),
    rows=lambda rows: [r for r in rows if r["config"] == COMM_VOLUME_ALGORITHMS_CONFIG])


# The local-SGD schemes: what a replica sends when the replicas meet.
comm_volume_local_sgd = per_row(
    ("scheme", lambda r: f"{r['scheme']}, {r['average_method']}" if r["average_method"]
     else r["scheme"]), _MESH,
    ("HLO collectives", lambda r: ", ".join(f"{s['ops']} {kind}" for kind, s in r["hlo"].items())),
    ("HLO MB per replica (every branch)", lambda r: mb(r["hlo_bytes_per_device"])),
    ("analytic MB (every branch)", lambda r: mb(r["analytic_bytes_per_device"]["total"])),
    ("analytic MB per meeting", lambda r: mb(r["analytic_bytes_per_meeting"])),
    rows=lambda rows: [r for r in rows if "analytic_bytes_per_meeting" in r])

TABLES = {"comm_volume": (comm_volume, "comm_volume.json"),
          "comm_volume_algorithms": (comm_volume_algorithms, "comm_volume.json"),
          "comm_volume_local_sgd": (comm_volume_local_sgd, "comm_volume.json")}

"""The tables of the time model against the papers (docs/communication.md), from
scaling_model.json (benchmarks/choosing/scaling_model.py)."""

from benchmarks import per_row, table


def scaling_model(result) -> str:
  """Predicted speed-up vs devices, by all-reduce algorithm."""
  points = result["speedup_vs_devices"]
  speedup = {(a, p["devices"]): p["speedup"] for a, ps in points.items() for p in ps}
  devices = sorted({n for _, n in speedup})
  return table(["devices", *(a.replace("_", " ") for a in points)],
                ([n, *(f"{speedup[a, n]:.1f}" if (a, n) in speedup else "—" for a in points)]
                 for n in devices))


# Yadan et al.'s Table 1 through the time model.
scaling_model_yadan = per_row(
    ("configuration", "{configuration}"), ("mesh", "{mesh}"),
    ("paper days", "{paper}"), ("predicted days", "{predicted}"),
    ("predicted ÷ paper", "{ratio}"), ("paper speed-up", "{paper_speedup}"),
    ("predicted speed-up", "{predicted_speedup}"),
    ("predicted compute / communication s per step", "{compute_s} / {communication_s}"),
    rows=lambda result: result["yadan_table1"])

# Krizhevsky 2014's Table 1 through the time model.
scaling_model_krizhevsky = per_row(
    ("GPUs", "{gpus}"), ("batches (conv, FC)", lambda r: r["batches (conv, FC)"]),
    ("as", "{scheme}"), ("paper speed-up", "{paper}"), ("predicted speed-up", "{predicted}"),
    ("predicted ÷ paper", "{ratio}"), rows=lambda result: result["krizhevsky2014_table1"])


def _value(value) -> str:
  if isinstance(value, dict):
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in value.items())
  return f"{value:.4g}" if isinstance(value, float) else str(value)


# The constants of the papers' machines, each with its source.
scaling_model_constants = per_row(
    ("machine", "{machine}"), ("constant", "{constant}"), ("value", lambda r: _value(r["value"])),
    ("source", "{source}"), rows=lambda result: result["constants"])

TABLES = {"scaling_model": (scaling_model, "scaling_model.json"),
          "scaling_model_yadan": (scaling_model_yadan, "scaling_model.json"),
          "scaling_model_krizhevsky": (scaling_model_krizhevsky, "scaling_model.json"),
          "scaling_model_constants": (scaling_model_constants, "scaling_model.json")}

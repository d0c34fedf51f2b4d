"""The tables of the time model's predictions (docs/communication.md), from scaling_model.json
(benchmarks/choosing/scaling_model.py)."""

from benchmarks import per_row, table


def scaling_model(result) -> str:
  """Predicted speed-up vs devices, by all-reduce algorithm."""
  points = result["speedup_vs_devices"]
  speedup = {(a, p["devices"]): p["speedup"] for a, ps in points.items() for p in ps}
  devices = sorted({n for _, n in speedup})
  return table(["devices", *(a.replace("_", " ") for a in points)],
                ([n, *(f"{speedup[a, n]:.1f}" if (a, n) in speedup else "—" for a in points)]
                 for n in devices))


# Yadan et al.'s Table 1 through the α-β model.
scaling_model_yadan = per_row(
    ("configuration", "{configuration}"), ("mesh", "{mesh}"),
    ("MB per device and step", "{mb_per_device}"), ("predicted days", "{predicted_days}"),
    ("paper days", "{paper_days}"), ("predicted speed-up", "{predicted_speedup}"),
    ("paper speed-up", "{paper_speedup}"),
    ("bandwidth the paper's days imply", lambda r: "—" if r["implied_gb_per_s"] is None
     else f"{r['implied_gb_per_s']} GB/s"),
    rows=lambda result: result["yadan_table1"])

# Krizhevsky 2014's owt schemes on 8 K20s through the α-β model.
scaling_model_owt = per_row(
    ("scheme", "({variant})"), ("FC updates per step", "{fc_updates_per_step}"),
    ("batches (conv, FC)", lambda r: r["batches (conv, FC)"]), ("predicted s per step", "{step_s}"),
    ("exposed communication s", "{exposed_communication_s}"),
    ("predicted speed-up", "{predicted_speedup}"),
    ("Krizhevsky's speed-up", "{krizhevsky_speedup}"),
    rows=lambda result: result["owt_variants_k20"]["rows"])


TABLES = {"scaling_model": (scaling_model, "scaling_model.json"),
          "scaling_model_yadan": (scaling_model_yadan, "scaling_model.json"),
          "scaling_model_owt": (scaling_model_owt, "scaling_model.json")}

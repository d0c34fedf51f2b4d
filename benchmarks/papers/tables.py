"""The tables of the papers' findings reproduced here (README, docs/schemes.md,
docs/large_batch.md), from the JSON of benchmarks/papers/: table1, owt_variants, large_batch,
local_sgd_convergence."""

from benchmarks import per_row, percent, table


# Every config trained end to end by main.py.
table1 = per_row(
    ("config", "{config}"), ("mesh", "{mesh}"), ("steps", "{steps}"),
    ("wall-clock", "{wall_clock_s} s"),
    ("train images/s (median)", "{train_images_per_sec_median}"),
    ("test top-1", lambda r: percent(r["eval_top1"])),
    ("test top-5", lambda r: percent(r["eval_top5"])))

# benchmarks/papers/owt_variants.py: owt8 under (a) and (b) at equal epochs.
owt_variants = per_row(
    ("run", "{run}"),
    ("overrides of its config", lambda r: f"`{r['config']}` " + (
        " ".join(o.removeprefix("--config.") for o in r["overrides"]) or "—")),
    ("steps (= epochs)", "{steps}"), ("test top-1", lambda r: percent(r["eval_top1"])),
    ("top-5", lambda r: percent(r["eval_top5"])), ("wall-clock s", "{wall_clock_s}"))

# Final test top-1 of every run.
local_sgd_convergence = per_row(("run", "{run}"),
                                 ("final test top-1", lambda r: percent(r["eval_top1"][-1])))


def large_batch_tiny(results) -> str:
  """The first sweep (alexnet_bn_tiny): final test top-1 by global batch and rule."""
  rules = list(dict.fromkeys(r["rule"] for r in results))
  top1 = {(r["rule"], r["global_batch"]): r["eval_top1"] for r in results}
  steps = {r["global_batch"]: r["steps"] for r in results}
  return table(["global batch", "steps", *rules],
                ([b, steps[b], *(percent(top1[r, b]) if (r, b) in top1 else "—" for r in rules)]
                 for b in sorted(steps)))


def _top1(r) -> str:
  if r["eval_top1"] is None:
    return f"NaN at step {r['diverged_at_step']}"
  return percent(r["eval_top1"])


_LARGE_BATCH_RULES = ("none", "linear", "linear+warmup", "lars")  # large_batch.RULES' order.
_REFERENCE_BATCH = 32  # large_batch.REFERENCE_BATCH; its tables compare 8× it.


def _best_sweep_cells(results) -> dict:
  """(model, batch, rule) → the sweep's best cell (a rule run with several settings)."""
  cells = {}
  for r in results:
    key = (r["model"], r["global_batch"], r["rule"])
    if r.get("part") == "sweep" and (key not in cells or (r["eval_top1"] or 0.0) >
                                     (cells[key]["eval_top1"] or 0.0)):
      cells[key] = r
  return cells


def _cell(cells: dict, key) -> str:
  return _top1(cells[key]) if key in cells else "—"


def large_batch(results) -> str:
  """The sweep: final test top-1 by model and global batch (rows) and rule (columns), the best
  cell where a rule was run with several settings (large_batch_grid lists them); "" until a
  cell of the sweep has run."""
  sweep = [r for r in results if r.get("part") == "sweep"]
  if not sweep:
    return ""
  rules = [rule for rule in _LARGE_BATCH_RULES if any(r["rule"] == rule for r in sweep)]
  cells = _best_sweep_cells(results)
  models = list(dict.fromkeys(r["model"] for r in sweep))
  rows = sorted({(r["model"], r["global_batch"], r["steps"]) for r in sweep},
                key=lambda x: (models.index(x[0]), x[1]))
  return table(["model", "global batch", "steps", *rules],
                ([model, batch, steps, *(_cell(cells, (model, batch, rule)) for rule in rules)]
                 for model, batch, steps in rows))


def large_batch_summary(results) -> str:
  """The README's view of the sweep: per model, the reference batch, every rule's best at 8×
  it, and the best rule at the largest batch run ("" until a cell of the sweep has run)."""
  cells = _best_sweep_cells(results)
  if not cells:
    return ""
  models = list(dict.fromkeys(model for model, _, _ in cells))
  rules = [rule for rule in _LARGE_BATCH_RULES if any(key[2] == rule for key in cells)]
  reference, large = _REFERENCE_BATCH, 8 * _REFERENCE_BATCH
  largest = max(batch for _, batch, _ in cells)

  def best_at_largest(model) -> str:
    runs = [cells[k] for k in cells if k[:2] == (model, largest)]
    best = max(runs, key=lambda r: r["eval_top1"] or 0.0) if runs else None
    return f"{best['rule']} {_top1(best)}" if best else "—"

  return table(["model", f"batch {reference}, none", *(f"{large}, {rule}" for rule in rules),
                 f"{largest}, best rule"],
                ([model, _cell(cells, (model, reference, "none")),
                  *(_cell(cells, (model, large, rule)) for rule in rules), best_at_largest(model)]
                 for model in models))


def _lars(r, key: str):
  return r[key] if r["rule"] == "lars" else "—"


# Every setting tried at 8× the reference batch for the rules that have settings (warmup; LARS's
# η and trust coefficient): the tuning grid and the sweep's cells ("" until one ran).
_large_batch_grid = per_row(
    ("model", "{model}"), ("rule", "{rule}"), ("warmup epochs", "{warmup_epochs}"),
    ("LARS η (at batch 32)", lambda r: _lars(r, "lars_lr")),
    ("LARS trust coefficient", lambda r: _lars(r, "lars_trust")), ("peak LR", "{peak_lr}"),
    ("test top-1", _top1),
    ("final training loss", lambda r: r["train_loss"][-1] if r["train_loss"] else "—"),
    rows=lambda results: [r for r in results if r.get("part") == "grid" or (
        r.get("part") == "sweep" and r["global_batch"] == 8 * _REFERENCE_BATCH
        and r["rule"] in ("linear+warmup", "lars"))])


def large_batch_grid(results) -> str:
  table = _large_batch_grid(results)
  return table if table.count("\n") > 1 else ""  # more than the header: something was tried.


TABLES = {"table1": (table1, "table1.json"),
          "owt_variants": (owt_variants, "owt_variants.json"),
          "local_sgd_convergence": (local_sgd_convergence, "local_sgd_convergence.json"),
          "large_batch_tiny": (large_batch_tiny, "large_batch_tiny.json"),
          "large_batch": (large_batch, "large_batch.json"),
          "large_batch_grid": (large_batch_grid, "large_batch.json"),
          "large_batch_summary": (large_batch_summary, "large_batch.json")}

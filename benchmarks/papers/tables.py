"""The tables of the papers' findings reproduced here (README, docs/schemes.md,
docs/large_batch.md, docs/asynchronous.md), from the JSON of benchmarks/papers/: table1,
owt_variants, large_batch, asynchronous."""

import statistics

from benchmarks import over_seeds, per_row, percent, seed_statistics, table


# Every config trained end to end by main.py.
table1 = per_row(
    ("config", "{config}"), ("mesh", "{mesh}"), ("steps", "{steps}"),
    ("wall-clock", "{wall_clock_s} s"),
    ("train images/s (median)", "{train_images_per_sec_median}"),
    ("test top-1", lambda r: percent(r["eval_top1"])),
    ("test top-5", lambda r: percent(r["eval_top5"])))

def _lowest_after_learning(r) -> str:
  lowest = r["lowest_top1_after_learning"]
  never = sum(v is None for v in lowest)
  return (percent(min(v for v in lowest if v is not None)) if never < len(lowest) else "—") + (
      f" ({never} of {len(lowest)} seeds never reached 50%)" if never else "")


# benchmarks/papers/owt_variants.py: owt8 under (a) and (b) at equal epochs, over seeds.
owt_variants = per_row(
    ("run", "{run}"), ("model", "{model}"),
    ("config", lambda r: f"`{r['config']}` " + (" ".join(
        o.removeprefix("--config.") for o in r["overrides"] if ".model=" not in o) or "—")),
    ("seeds", lambda r: len(r["seeds"])), ("test top-1 %", over_seeds),
    ("each seed", lambda r: ", ".join(f"{100 * v:.1f}" for v in r["eval_top1"])),
    ("lowest once past 50%", _lowest_after_learning))

def large_batch_tiny(results) -> str:
  """The first sweep (alexnet_bn_tiny): final test top-1 by global batch and rule."""
  rules = list(dict.fromkeys(r["rule"] for r in results))
  top1 = {(r["rule"], r["global_batch"]): r["eval_top1"] for r in results}
  steps = {r["global_batch"]: r["steps"] for r in results}
  return table(["global batch", "steps", *rules],
                ([b, steps[b], *(percent(top1[r, b]) if (r, b) in top1 else "—" for r in rules)]
                 for b in sorted(steps)))


def _top1(r) -> str:
  """A setting's test top-1 over its seeds, or the steps at which every seed diverged."""
  if r["seeds_diverged"] == len(r["seeds"]):
    return f"{over_seeds(r)} (step {', '.join(map(str, r['diverged_at_step']))})"
  return over_seeds(r)


_LARGE_BATCH_RULES = ("none", "linear", "linear+warmup", "lars")  # large_batch.RULES' order.
_REFERENCE_BATCH = 32  # large_batch.REFERENCE_BATCH; its tables compare 8× it.


def _best_sweep_cells(results, *, min_seeds: int = 1) -> dict:
  """(model, batch, rule) → the sweep's setting with the best mean top-1 (a rule run with
  several settings) among those run on at least `min_seeds` seeds."""
  cells = {}
  for r in results:
    key = (r["model"], r["global_batch"], r["rule"])
    if r.get("part") == "sweep" and len(r["seeds"]) >= min_seeds and (
        key not in cells or (r["eval_top1_mean"] or 0.0) > (cells[key]["eval_top1_mean"] or 0.0)):
      cells[key] = r
  return cells


def _cell(cells: dict, key) -> str:
  return _top1(cells[key]) if key in cells else "—"


def large_batch(results) -> str:
  """The sweep: final test top-1 by model and global batch (rows) and rule (columns), the best
  setting where a rule was run with several (large_batch_grid lists them), over its seeds; ""
  until a cell of the sweep has run."""
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


SUMMARY_SEEDS = 3  # the README's summary shows only settings run on at least this many seeds.


def large_batch_summary(results) -> str:
  """The README's view of the sweep, over at least SUMMARY_SEEDS seeds: per model, the reference
  batch, every rule's best at 8× it, and the best rule at the largest batch run ("" until such
  a setting has run)."""
  cells = _best_sweep_cells(results, min_seeds=SUMMARY_SEEDS)
  if not cells:
    return ""
  models = list(dict.fromkeys(model for model, _, _ in cells))
  rules = [rule for rule in _LARGE_BATCH_RULES if any(key[2] == rule for key in cells)]
  reference, large = _REFERENCE_BATCH, 8 * _REFERENCE_BATCH
  largest = max(batch for _, batch, _ in cells)

  def best_at_largest(model) -> str:
    runs = [cells[k] for k in cells if k[:2] == (model, largest)]
    best = max(runs, key=lambda r: r["eval_top1_mean"] or 0.0) if runs else None
    return f"{best['rule']} {_top1(best)}" if best else "—"

  return table(["model", f"batch {reference}, none", *(f"{large}, {rule}" for rule in rules),
                 f"{largest}, best rule"],
                ([model, _cell(cells, (model, reference, "none")),
                  *(_cell(cells, (model, large, rule)) for rule in rules), best_at_largest(model)]
                 for model in models))


def _final_loss(r) -> str:
  """The median over the seeds that finished of a setting's last training loss."""
  last = [losses[-1] for losses, top1 in zip(r["train_loss"], r["eval_top1"])
          if losses and top1 is not None]
  return f"{statistics.median(last):.4g}" if last else "—"


def _lars(r, key: str):
  return r[key] if r["rule"] == "lars" else "—"


# Every setting tried at 8× the reference batch for the rules that have settings (warmup; LARS's
# η and trust coefficient): the tuning grid and the sweep's cells ("" until one ran).
_large_batch_grid = per_row(
    ("model", "{model}"), ("rule", "{rule}"), ("warmup epochs", "{warmup_epochs}"),
    ("LARS η (at batch 32)", lambda r: _lars(r, "lars_lr")),
    ("LARS trust coefficient", lambda r: _lars(r, "lars_trust")), ("peak LR", "{peak_lr}"),
    ("test top-1 % (mean ± sd [± sampling])", _top1),
    ("seeds", lambda r: len(r["seeds"])), ("final training loss (median)", _final_loss),
    rows=lambda results: [r for r in results if r.get("part") == "grid" or (
        r.get("part") == "sweep" and r["global_batch"] == 8 * _REFERENCE_BATCH
        and r["rule"] in ("linear+warmup", "lars"))])


def large_batch_grid(results) -> str:
  table = _large_batch_grid(results)
  return table if table.count("\n") > 1 else ""  # more than the header: something was tried.


def _spread(values) -> str:
  """"mean ± standard deviation over the seeds [± the test set's sampling error]"."""
  return over_seeds({"eval_top1": values, **seed_statistics(values)})


def _by_label(runs, part):
  """(label, its runs, one of them) in order, for the runs of `part`."""
  labels = dict.fromkeys(r["label"] for r in runs if r["part"].startswith(part))
  for label in labels:
    chosen = [r for r in runs if r["label"] == label]
    yield label, chosen, chosen[0]


def _rows_of(part):
  """The rows of `part`'s table: one per setting, with its runs and the first of them."""
  def rows(result):
    return [{"label": label, "runs": chosen, "first": first}
            for label, chosen, first in _by_label(result["runs"], part)]
  return rows


_FINAL = ("final test top-1 % (mean ± sd over seeds [± sampling])",
          lambda r: _spread([x["final_eval_top1"] for x in r["runs"]]))

# Why A-SGD at n_sync 4 collapsed: one change at a time.
asynchronous_cause = per_row(
    ("run", "{label}"), ("seeds", lambda r: len(r["runs"])),
    ("momentum", lambda r: r["first"]["momentum"]),
    ("rate per client", lambda r: r["first"]["learning_rate"]), _FINAL,
    ("lowest seed", lambda r: percent(min(x["final_eval_top1"] for x in r["runs"]))),
    rows=_rows_of("cause"))


def late_error(run) -> float:
  """The training error over the last tenth of a run (Paine smooths over 400 of ~10,000 steps
  an epoch; here a tenth of 360 steps is about that share of the curve)."""
  tail = run["train_error"][-max(1, len(run["train_error"]) // 10):]
  return statistics.mean(e for _, e in tail)


# Paine et al.'s experiments at digits' scale.
asynchronous_paine = per_row(
    ("run", "{label}"), ("clients", lambda r: r["first"]["clients"]),
    ("n_sync (% of an epoch)", lambda r: "—" if r["first"]["n_sync"] is None else
     f"{r['first']['n_sync']} ({100 * r['first']['staleness_fraction_of_epoch']:.1f}%)"),
    ("warm start", lambda r: f"{100 * r['first']['warm_start_fraction']:.0f}%"),
    _FINAL,
    ("late training error %",
     lambda r: f"{100 * statistics.mean(late_error(x) for x in r['runs']):.1f}"),
    ("predicted s per step: Blue Waters / H100 node",
     lambda r: "{paper_hardware} / {h100_node}".format_map(r["first"]["predicted_step_s"])),
    rows=_rows_of("paine"))

# Su et al.'s four averaging methods.
asynchronous_su = per_row(
    ("method", lambda r: r["first"]["average_method"]),
    ("every", lambda r: r["first"]["sync_every"]), ("replicas", lambda r: r["first"]["clients"]),
    _FINAL,
    ("predicted s per step: 8 K20s / H100 node",
     lambda r: "{paper_hardware} / {h100_node}".format_map(r["first"]["predicted_step_s"])),
    rows=_rows_of("su"))

# The papers' claims against the runs.
def _evidence(value, top: bool = True) -> str:
  """A finding's numbers, compactly: `key value; key {k: v, …}`."""
  if isinstance(value, dict):
    items = [f"{str(k).replace('_', ' ')}{' ' if top else ': '}{_evidence(v, False)}"
             for k, v in value.items()]
    return "; ".join(items) if top else "{" + ", ".join(items) + "}"
  if isinstance(value, list):
    return "[" + ", ".join(_evidence(v, False) for v in value) + "]"
  return "—" if value is None else str(value)


asynchronous_findings = per_row(
    ("claim", "{claim}"), ("source (the paper's figure)", "{source}"),
    ("verdict", "**{verdict}**"), ("test", "{test}"),
    ("result here", lambda r: _evidence(r["evidence"])), rows=lambda result: result["findings"])


def _seconds_to(target):
  def cell(r):
    got = r["seconds_to"][target]
    if got is None:
      missed = sum(v is None for v in r["steps_to"][target])
      return f"out of reach ({missed} of {r['seeds']} seeds)"
    return f"{got['papers_hardware']:.0f} / {got['h100_node']:.1f}"
  return cell


# Accuracy against time: each 4-device curve priced as ImageNet AlexNet steps.
asynchronous_time = per_row(
    ("scheme", "{scheme}"), ("run (its curve)", "{run}"),
    ("best test top-1 %", lambda r: f"{100 * r['best_top1']:.1f}"),
    ("s per step: 8 K20s / H100 node",
     lambda r: "{papers_hardware:.3f} / {h100_node:.4f}".format_map(r["step_s"])),
    ("s to 40%: 8 K20s / H100 node", _seconds_to("0.4")),
    ("s to 80%: 8 K20s / H100 node", _seconds_to("0.8")),
    rows=lambda result: result["time"])


TABLES = {"table1": (table1, "table1.json"),
          "asynchronous_findings": (asynchronous_findings, "asynchronous.json"),
          "asynchronous_cause": (asynchronous_cause, "asynchronous.json"),
          "asynchronous_paine": (asynchronous_paine, "asynchronous.json"),
          "asynchronous_su": (asynchronous_su, "asynchronous.json"),
          "asynchronous_time": (asynchronous_time, "asynchronous.json"),
          "owt_variants": (owt_variants, "owt_variants.json"),
          "large_batch_tiny": (large_batch_tiny, "large_batch_tiny.json"),
          "large_batch": (large_batch, "large_batch.json"),
          "large_batch_grid": (large_batch_grid, "large_batch.json"),
          "large_batch_summary": (large_batch_summary, "large_batch.json")}

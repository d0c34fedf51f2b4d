"""The tables of the papers' findings reproduced here (docs/schemes.md,
docs/large_batch.md, docs/asynchronous.md), from the JSON of benchmarks/papers/: table1,
owt_variants, large_batch, asynchronous."""

import math
import statistics

from benchmarks import (DIGITS_TEST_IMAGES, machine_in_words, over_seeds, per_row, percent,
                        seed_statistics, table)
from benchmarks.papers import asynchronous_claims as claims
from benchmarks.papers import asynchronous_findings as rules


def _trained(results) -> list[dict]:
  """table1's rows of the configs it trained (not those whose data is not here)."""
  return [r for r in results if "not_run" not in r]


# Every config trained end to end by main.py (docs/schemes.md).
table1 = per_row(
    ("config", "{config}"), ("mesh", "{mesh}"), ("steps", "{steps}"),
    ("wall-clock", "{wall_clock_s} s"),
    ("train images/s (median)", "{train_images_per_sec_median}"),
    ("test top-1", lambda r: percent(r["eval_top1"])),
    ("test top-5", lambda r: percent(r["eval_top5"])), rows=_trained)


def duration(seconds: float) -> str:
  """A wall time as a reader plans with it: "50 s", "3.5 min", "1.2 h"."""
  if seconds < 100:
    return f"{seconds:.0f} s"
  return f"{seconds / 60:.1f} min" if seconds < 6000 else f"{seconds / 3600:.1f} h"


def expected_results(loaded) -> str:
  """docs/configs.md's table: every config of table1.json — what it trains, where and how long
  it ran (the record line below the table says the rest of the machine), its test top-1 and the
  date of the run; a config not run here, the published result of its recipe and its source.
  Made from the file's record and results (`with_record`)."""
  record, results = loaded

  def cells(r):
    config = f"[`{r['config']}`](../configs/{r['config']}.py)"
    if "not_run" in r:
      published = r["published"]
      expected = (f"{percent(published['top1'])} published ({published['source']})" if published
                  else f"— ({r['not_run']})")
      return [config, r["scheme"], r["mesh"], r["trains"], "not run here", "—", expected, "—"]
    return [config, r["scheme"], r["mesh"], r["trains"], machine_in_words(record["machine"]),
            duration(r["wall_clock_s"]), percent(r["eval_top1"]), record["date"]]

  return table(["config", "scheme", "mesh", "what it trains", "machine", "wall time",
                "test top-1", "measured"], map(cells, results))


expected_results.with_record = True

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

def _top1(r) -> str:
  """A setting's test top-1 over its seeds, or the steps at which every seed diverged."""
  if r["seeds_diverged"] == len(r["seeds"]):
    return f"{over_seeds(r)} (step {', '.join(map(str, r['diverged_at_step']))})"
  return over_seeds(r)


_LARGE_BATCH_RULES = ("none", "linear", "linear+warmup", "lars")  # large_batch.RULES' order.
_REFERENCE_BATCH = 32  # large_batch.REFERENCE_BATCH; its tables compare 8× it.


def _dataset(r) -> str:
  return r.get("dataset", "digits")  # the sweep's first rows name none: they ran on digits.


def _best_sweep_cells(results, *, min_seeds: int = 1, dataset: str = "digits") -> dict:
  """(model, batch, rule) → the sweep's setting on `dataset` with the best mean top-1 (a rule run
  with several settings) among those run on at least `min_seeds` seeds."""
  cells = {}
  for r in results:
    key = (r["model"], r["global_batch"], r["rule"])
    if (r.get("part") == "sweep" and _dataset(r) == dataset and len(r["seeds"]) >= min_seeds
        and (
        key not in cells or (r["eval_top1_mean"] or 0.0) > (cells[key]["eval_top1_mean"] or 0.0))):
      cells[key] = r
  return cells


def _cell(cells: dict, key) -> str:
  return _top1(cells[key]) if key in cells else "—"


def large_batch(results) -> str:
  """The sweep: final test top-1 by model and global batch (rows) and rule (columns), the best
  setting where a rule was run with several (large_batch_grid lists them), over its seeds; ""
  until a cell of the sweep has run."""
  sweep = [r for r in results if r.get("part") == "sweep" and _dataset(r) == "digits"]
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


# docs/large_batch.md's summary shows only settings run on at least this many seeds.
SUMMARY_SEEDS = 3


def large_batch_summary(results) -> str:
  """The summary of the sweep, over at least SUMMARY_SEEDS seeds: per model, the reference
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
        r.get("part") == "sweep" and _dataset(r) == "digits"
        and r["global_batch"] == 8 * _REFERENCE_BATCH and r["rule"] in ("linear+warmup", "lars"))])


def large_batch_grid(results) -> str:
  table = _large_batch_grid(results)
  return table if table.count("\n") > 1 else ""  # more than the header: something was tried.


# --- Goyal et al.'s finding beside AlexNet (docs/large_batch.md): the verdict rule, stated before
# the runs it judges -----------------------------------------------------------------------------

# The two networks on the same data with the same rule: a BN ResNet and AlexNet without BN.
GOYAL_MODELS = {"resnet_tiny": "BN ResNet", "alexnet_tiny": "AlexNet, no BN"}
GOYAL_RULE = "linear+warmup"  # Goyal et al.'s linear scaling with gradual warmup, at 8×.
GOYAL_SEEDS = 3  # seeds both settings need before a verdict.
GOYAL_DATASETS = ("digits", "mnist_5k")  # large_batch.DATASETS.
_CHANCE = 0.1  # ten classes: a seed that diverged counts as a guess.


def keeps_reference(reference: dict, large: dict) -> dict | None:
  """Whether `large` (8× the reference batch) keeps `reference`'s test top-1 within the spread.

  Kept: the mean over seeds at 8× is at least the reference's mean less the margin
  2·√(sd_ref²/n_ref + sd_8×²/n_8× + p(1 − p)/N): two standard errors of the difference of the two
  means over seeds, with the test set's sampling error at the reference's accuracy p (N test
  images) added, so that a reference whose seeds agree to the last image still has a margin. A
  seed that diverged counts at chance (10%). None until both have `GOYAL_SEEDS` seeds.

  Returns:
    {"difference": mean at 8× − the reference's, "margin", "kept"} as fractions of the test set.
  """
  if min(len(reference["seeds"]), len(large["seeds"])) < GOYAL_SEEDS:
    return None
  ref, big = ([_CHANCE if v is None else v for v in r["eval_top1"]] for r in (reference, large))
  p = statistics.mean(ref)
  test_images = reference.get("test_images", DIGITS_TEST_IMAGES)
  margin = 2 * math.sqrt(statistics.variance(ref) / len(ref) +
                         statistics.variance(big) / len(big) + p * (1 - p) / test_images)
  difference = statistics.mean(big) - p
  return {"difference": difference, "margin": margin, "kept": difference >= -margin}


def _goyal_judgements(results):
  """(dataset, model, its cells, keeps_reference's answer) for every network and set run."""
  for dataset in GOYAL_DATASETS:
    cells = _best_sweep_cells(results, dataset=dataset)
    for model in GOYAL_MODELS:
      reference = cells.get((model, _REFERENCE_BATCH, "none"))
      large = cells.get((model, 8 * _REFERENCE_BATCH, GOYAL_RULE))
      if reference or large:
        judged = keeps_reference(reference, large) if reference and large else None
        yield dataset, model, cells, judged


def large_batch_goyal(results) -> str:
  """The BN ResNet and AlexNet on each set: the reference batch, each rule at 8×, and whether
  linear + warmup keeps the reference's accuracy (`keeps_reference`); "" until a cell ran."""
  large = 8 * _REFERENCE_BATCH
  rules = ("none", "linear", GOYAL_RULE)
  points = lambda judged, key: f"{100 * judged[key]:+.1f}" if judged else "—"
  rows = [[dataset, f"{model} ({GOYAL_MODELS[model]})",
           _cell(cells, (model, _REFERENCE_BATCH, "none")),
           *(_cell(cells, (model, large, rule)) for rule in rules),
           points(judged, "difference"), f"±{100 * judged['margin']:.1f}" if judged else "—",
           ("yes" if judged["kept"] else "no") if judged else "—"]
          for dataset, model, cells, judged in _goyal_judgements(results)]
  if not rows:
    return ""
  return table(["data", "model", f"batch {_REFERENCE_BATCH}, none",
                *(f"{large}, {rule}" for rule in rules),
                f"{large} {GOYAL_RULE} − {_REFERENCE_BATCH} (points)", "margin (points)",
                "keeps its accuracy"], rows)


def large_batch_goyal_verdict(results) -> str:
  """Per set, the pre-stated verdict: reproduced where the BN ResNet keeps its reference accuracy
  at 8× under linear + warmup and AlexNet does not ("" until a cell ran)."""
  kept = {}
  for dataset, model, _, judged in _goyal_judgements(results):
    kept.setdefault(dataset, {})[model] = None if judged is None else judged["kept"]
  resnet, alexnet = GOYAL_MODELS
  rows = []
  for dataset, by_model in kept.items():
    ours, theirs = by_model.get(resnet), by_model.get(alexnet)
    if ours is None or theirs is None:
      verdict = f"not yet decided: both need {GOYAL_SEEDS} seeds at both batches"
    elif ours and not theirs:
      verdict = "reproduced"
    elif ours:
      verdict = "not reproduced: AlexNet keeps its accuracy too, so this set does not tell them apart"
    else:
      verdict = "not reproduced: the BN ResNet loses accuracy at 8× too"
    answer = lambda k: "—" if k is None else "yes" if k else "no"
    rows.append([dataset, answer(ours), answer(theirs), verdict])
  if not rows:
    return ""
  return table(["data", f"{resnet} keeps it", f"{alexnet} keeps it", "verdict"], rows)


def _spread(values) -> str:
  """"mean ± standard deviation over the seeds [± the test set's sampling error]"."""
  return over_seeds({"eval_top1": values, **seed_statistics(values)})


# --- docs/asynchronous.md (benchmarks/papers/asynchronous.py) ---------------------------------


def _runs_by_label(result, part):
  """The settings of `part` in order: (label, its runs)."""
  runs = [r for r in result["runs"] if r["part"] == part]
  for label in dict.fromkeys(r["label"] for r in runs):
    yield label, [r for r in runs if r["label"] == label]


def _setting_rows(part, **extra):
  """One row per setting of `part`: its first run's fields, its runs, and `extra`'s cells."""
  def rows(result):
    return [{**chosen[0], "runs": chosen, **{k: f(chosen, result) for k, f in extra.items()}}
            for _, chosen in _runs_by_label(result, part)]
  return rows


_TOP1 = ("final test top-1 % (mean ± sd over seeds [± sampling])",
         lambda r: _spread([x["final_eval_top1"] for x in r["runs"]]))
_SEEDS = ("seeds", lambda r: len(r["runs"]))


def _prices(result):
  """`prices(run, where)`: the study's unrounded seconds per step (asynchronous_findings)."""
  return rules.stored_prices(result["step_prices"])


def _price(where: str, other: str = "h100_node"):
  """A table cell: the setting's seconds per step on `where` and on `other`, unrounded prices
  shown to 4 significant figures."""
  return lambda r, result=None: " / ".join(
      f"{r['prices'][w]:.4g}" for w in (where, other))


def _with_prices(rows):
  """`rows(result)` with each row's unrounded prices (`prices`) added."""
  def priced(result):
    return [{**r, "prices": result["step_prices"][rules.price_key(r)]} for r in rows(result)]
  return priced


def _interval(ci, scale: float = 1.0, digits: int = 1) -> str:
  """ "mean [low, high]" of an interval (asynchronous_findings.interval), `scale`d."""
  if ci is None:
    return "—"
  low, high = ci["ci95"]
  return f"{scale * ci['mean']:+.{digits}f} [{scale * low:+.{digits}f}, {scale * high:+.{digits}f}]"


def _speedup(result) -> str:
  """A speed-up (asynchronous_findings.speedup): "×mean [low, high]", and its missed seeds."""
  if result is None:
    return "—"
  text = (f"×{result['geometric_mean']} [{result['ci95'][0]}, {result['ci95'][1]}]"
          if result["ci95"] else
          f"×{result['geometric_mean']}" if result["geometric_mean"] else "—")
  notes = [f"{len(result[k])} seed{'s' * (len(result[k]) > 1)} {what}"
           for k, what in (("method_missed", "never reached it"),
                           ("baseline_missed", "left out: the baseline never reached it"))
           if result[k]]
  return text + (f" ({'; '.join(notes)})" if notes else "")


def _mean_time_to(target_key):
  def cell(r, result):
    target = result["chosen"].get(target_key)
    steps = [rules.time_to(x, target) for x in r["runs"]] if target else []
    reached = [s for s in steps if s != float("inf")]
    if not reached:
      return "never" if steps else "—"
    return (f"{statistics.mean(reached):.0f}" +
            (f" ({len(steps) - len(reached)} of {len(steps)} never)" if len(reached) < len(steps)
             else ""))
  return cell


def _over_probed(function, digits: str = ".3f"):
  """The mean over a setting's runs with a whole probe curve of `function(run)`, and how many
  diverged (their curves stop where they did)."""
  def cell(r):
    values = [function(x) for x in r["runs"] if rules.probed(x)]
    diverged = len(r["runs"]) - len(values)
    text = format(statistics.mean(values), digits) if values else "—"
    return text + (f" ({diverged} diverged)" if diverged else "")
  return cell


def _probe_mean(key, start, stop):
  """A probed curve's mean over [start, stop) of its length, over the runs."""
  return _over_probed(lambda x: statistics.mean(
      x[key][int(start * len(x[key])):int(stop * len(x[key]))]))


asynchronous_reference = per_row(
    ("run", "{label}"), ("rate", "{learning_rate}"), ("steps", "{steps}"), _SEEDS, _TOP1,
    ("client steps to the target (mean)", lambda r: r["to_target"]),
    rows=_setting_rows("reference", to_target=lambda chosen, result: _mean_time_to(
        "target_top1" if chosen[0]["steps"] == 1080 else "su_target_top1")(
            {"runs": chosen}, result)))

asynchronous_synchronous = per_row(
    ("run", "{label}"), ("rate (global batch of 128)", "{learning_rate}"), _SEEDS, _TOP1,
    rows=_setting_rows("synchronous"))


def _momentum_rows(result):
  return result.get("momentum_effect", [])


asynchronous_momentum = per_row(
    ("n_sync", "{n_sync}"), ("η/(1−β)", "{effective_step}"),
    ("momentum 0: η, top-1 %", lambda r: f"{r['effective_step']}, "
                                          f"{100 * r['top1_momentum_0']:.1f}"),
    ("momentum 0.9: η, top-1 %", lambda r: f"{round(r['effective_step'] * 0.1, 6)}, "
                                            f"{100 * r['top1_momentum_0.9']:.1f}"),
    ("0.9 − 0, points (95% interval)", lambda r: "both at chance" if r.get("bound") else
     _interval(r["difference"], 100)),
    ("seeds below 20%: 0 / 0.9 (Fisher exact p)", lambda r: "—" if r.get(
        "collapse_fisher_p") is None else f"{r['collapsed_momentum_0']} / "
        f"{r['collapsed_momentum_0.9']} ({r['collapse_fisher_p']:.2g})"),
    rows=_momentum_rows)


def _staleness_rows(result):
  effect = result.get("staleness_effect")
  if not effect:
    return []
  loss = {c["to"]: c["loss"] for c in effect["chain"]}
  return [{**b, "loss": loss.get(b["n_sync"]),
           "reached": effect["reached_at_0.5"][f"n_sync {b['n_sync']}"],
           "collapsed": effect["collapsed_at_1"][f"n_sync {b['n_sync']}"]} for b in effect["best"]]


asynchronous_staleness = per_row(
    ("n_sync", "{n_sync}"), ("best η/(1−β)", "{effective_step}"),
    ("its final test top-1 %", lambda r: _pct(r["top1"])),
    ("lost from the n_sync before, points", lambda r: _interval(r["loss"], 100)),
    ("seeds reaching the target at η/(1−β) 0.5", "{reached}"),
    ("seeds below 20% at η/(1−β) 1", "{collapsed}"), rows=_staleness_rows)


def _paine1_rows(result):
  """Experiment 1's settings: lock-step (`paine1`), at drawn speeds (`speeds_paine1`), and summed
  at the summing part's rate (its 1,080-step rows)."""
  return [{**runs[0], "runs": runs,
           "speedup": rules.experiment1_speedup(
               result["runs"], result["chosen"], _prices(result), part=part,
               label=runs[0]["label"]),
           "to_target": _mean_time_to("target_top1")({"runs": runs}, result)}
          for part in ("paine1", "speeds_paine1", "summing")
          for _, runs in _runs_by_label(result, part) if runs[0]["steps"] == 1080]


asynchronous_paine1 = per_row(
    ("run", "{label}"), ("server", "{server_rule}"), ("n_sync", "{n_sync}"),
    ("clients' step times", lambda r: r.get("step_times", "equal")), _SEEDS, _TOP1,
    ("time to the target, mean client steps (mean)", "{to_target}"),
    ("speed-up over one client, priced on Blue Waters (95% interval)",
     lambda r: _speedup(r["speedup"])),
    ("predicted s per step: Blue Waters / H100 node", _price("blue_waters")),
    rows=_with_prices(_paine1_rows))


def _late_slope(run):
  n = len(run["probe_loss"])
  return rules.slope_per_100_steps(run["probe_loss"], n // 2, n)


def _rough(run):
  n = len(run["probe_loss"])
  return rules.roughness(run["probe_loss"], n // 2, n)


asynchronous_paine2 = per_row(
    ("run", "{label}"), ("clients", "{clients}"), ("server", lambda r: r["server_rule"] or "—"),
    ("n_sync", lambda r: r["n_sync"] or "—"), _SEEDS,
    ("probe loss, first tenth", _probe_mean("probe_loss", 0, 0.1)),
    ("probe loss slope per 100 steps, second half", _over_probed(_late_slope, "+.3f")),
    ("final probe loss", _probe_mean("probe_loss", 0.9, 1.0)), _TOP1,
    rows=_setting_rows("paine2"))


asynchronous_paine3 = per_row(
    ("run", "{label}"), ("clients", "{clients}"), ("n_sync", lambda r: r["n_sync"] or "—"),
    ("momentum after the warm start", lambda r: "—" if r["clients"] == 1 else
     "client 0's" if r["warm_start_momentum"] else "zero"), _SEEDS,
    ("late training error % (probe)", _over_probed(
        lambda x: 100 * statistics.mean(x["probe_error"][-len(x["probe_error"]) // 10:]), ".1f")),
    ("roughness of the probe loss, second half", _over_probed(_rough, ".4f")), _TOP1,
    ("predicted s per step: Blue Waters / H100 node", _price("blue_waters")),
    rows=_with_prices(_setting_rows("paine3")))


def _su_rows(result):
  rates = result["chosen"].get("su_rates", {})
  rows = []
  for _, runs in _runs_by_label(result, "su"):
    first = runs[0]
    if rates.get(f"{first['clients']}, {first['sync_every']}") != first["learning_rate"]:
      continue  # a rate allreduce did not choose: in the tuning table.
    over_one, over_every_step = rules.su_speedups(
        result["runs"], result["chosen"], _prices(result), method=first["average_method"],
        replicas=first["clients"], every=first["sync_every"]) or (None, None)
    rows.append({**first, "runs": runs, "over_one": over_one, "over_every_step": over_every_step,
                 "to_target": _mean_time_to("su_target_top1")({"runs": runs}, result)})
  return rows


asynchronous_su = per_row(
    ("method", "{average_method}"), ("every", "{sync_every}"), ("replicas", "{clients}"),
    ("rate (chosen on allreduce)", "{learning_rate}"), _SEEDS, _TOP1,
    ("steps to the target (mean)", "{to_target}"),
    ("speed-up over one client, priced on 8 K20s", lambda r: _speedup(r["over_one"])),
    ("over averaging every step", lambda r: _speedup(r["over_every_step"])),
    ("predicted s per step: 8 K20s / H100 node", _price("k20s")),
    rows=_with_prices(_su_rows))

asynchronous_su_rates = per_row(
    ("replicas", "{clients}"), ("every", "{sync_every}"), ("rate", "{learning_rate}"), _SEEDS,
    _TOP1, rows=lambda result: [{**runs[0], "runs": runs} for _, runs in
                                _runs_by_label(result, "su")
                                if runs[0]["average_method"] == "allreduce"])

asynchronous_validate = per_row(
    ("run", "{label}"), ("seeds", lambda r: ", ".join(str(x["seed"]) for x in r["runs"])), _TOP1,
    ("each seed", lambda r: ", ".join(f"{100 * x['final_eval_top1']:.1f}" for x in r["runs"])),
    rows=_setting_rows("validate"))


asynchronous_overlap = per_row(
    ("step (4 H100s, ImageNet AlexNet, bfloat16)", "{scheme}"),
    ("its meetings' collectives", lambda r: ", ".join(
        f"{c['kind']} {c['mb']:g} MB" for c in r["collectives"])),
    ("compute ops in flight with each", lambda r: ", ".join(
        str(c["compute_ops_in_flight"]) for c in r["collectives"])),
    ("of which convolutions or matmuls", lambda r: ", ".join(
        str(c["convolutions_and_matmuls_in_flight"]) for c in r["collectives"])),
    ("jax", "{jax}"), rows=lambda result: result.get("overlap", []))


def _evidence_value(value) -> str:
  """An interval, a speed-up, a dict or a number of a finding's evidence, compactly."""
  if isinstance(value, dict) and {"ci95", "mean", "n"} <= set(value):
    return f"{_interval(value, 1.0, 4)} (n {value['n']})"
  if isinstance(value, dict) and "geometric_mean" in value:
    return _speedup(value)
  if isinstance(value, dict):
    return "{" + "; ".join(f"{str(k).replace('_', ' ')}: {_evidence_value(v)}"
                           for k, v in value.items()) + "}"
  if isinstance(value, list):
    return "[" + ", ".join(_evidence_value(v) for v in value) + "]"
  return "—" if value is None else str(value)


def _evidence(evidence: dict) -> str:
  return "; ".join(f"{k.replace('_', ' ')} {_evidence_value(v)}" for k, v in evidence.items())


def _verdict_rows(result):
  return claims.numbered(result.get("verdicts") or [])


asynchronous_verdicts = per_row(
    ("", "{number}"), ("claim", "{claim}"), ("source", "{source}"),
    ("rule fixed before the data", lambda r: "yes" if r["fixed_before"] else "**no**"),
    ("key numbers [95% interval]", claims.keys_text), ("verdict", claims.verdict_text),
    ("caveat", "{caveat}"),
    rows=_verdict_rows)

asynchronous_rules = per_row(
    ("", "{number}"), ("claim", "{claim}"), ("the rule", "{test}"),
    ("decided after the data", lambda r: r["decided_after"] or "—"),
    ("its p; Holm's", lambda r: "—" if r["p"] is None else f"{r['p']:.2g}; {r['holm_p']:.2g}"),
    ("every number it reads", lambda r: _evidence(r["evidence"])), rows=_verdict_rows)


def _pct(value) -> str:
  return "—" if value is None else f"{100 * value:.1f}"


asynchronous_preset = per_row(
    ("setting (momentum sweep, seeds 0–4)", "{label}"),
    ("final test top-1 %", lambda r: _pct(r["top1"])),
    ("minus synchronous, points", lambda r: _interval(r["top1_minus_synchronous"], 100)),
    ("speed-up over synchronous to the target, one H100 node",
     lambda r: _speedup(r["speedup_over_synchronous"])),
    rows=lambda result: [result["chosen"]["asgd8"]] if result["chosen"].get("asgd8") else [])


def _validation_rows(result):
  v = result.get("preset_validation")
  if not v:
    return []
  first = v.get("first_version")
  return [{**v, "run": f"configs/asgd8.py (n_sync {v['n_sync']})"}] + (
      [{**first, "run": rules.FIRST_PRESET, "synchronous_top1": v["synchronous_top1"]}]
      if first else [])


asynchronous_preset_validation = per_row(
    ("run (seeds 5–9)", "{run}"),
    ("final test top-1 %", lambda r: _spread(r["top1"])),
    ("synchronous, same seeds", lambda r: _spread(r["synchronous_top1"])),
    ("difference, points", lambda r: _interval(r["top1_minus_synchronous"], 100)),
    ("speed-up over synchronous to the target, one H100 node",
     lambda r: _speedup(r["speedup_over_synchronous"])),
    ("its time as a multiple of synchronous training's",
     lambda r: claims.times_of(r["speedup_over_synchronous"])),
    rows=_validation_rows)

asynchronous_where = per_row(
    ("machine (ImageNet AlexNet, 128 images a GPU)", "{machine}"),
    ("synchronous s per step", "{synchronous_step_s}"), ("A-SGD s per step", "{asgd_step_s}"),
    ("configs/asgd8.py's speed-up to the target (steps measured, priced by the time model)",
     lambda r: _speedup(r["speedup"])),
    ("the fastest stale sweep setting here", "{fastest}"),
    ("its speed-up", lambda r: _speedup(r["fastest_speedup"])),
    rows=lambda result: result.get("where_asgd_is_faster") or [])


def _largest_rows(result):
  found = result.get("largest_step")
  if not found:
    return []
  exact = f"{found['sign_test_p']:.2g} / {found['fisher_p']:.2g}"
  return [{"run": name, "collapsed": found["collapsed"][name], "top1": found["top1"][name],
           "exact": exact if name == "n_sync 1" else ""}
          for name in ("n_sync 1", "n_sync 4", "data parallelism")]


asynchronous_largest_step = per_row(
    ("momentum 0.9, η/(1−β) 1 (rate 0.1)", "{run}"), ("seeds below 20%", "{collapsed}"),
    ("mean final test top-1 %", lambda r: _pct(r["top1"])),
    ("n_sync 1 against 4: exact sign test p / Fisher exact p", "{exact}"), rows=_largest_rows)

_asynchronous_summing = per_row(
    ("client rate", "{learning_rate}"), ("server's η/(1−β)", "{server_effective_step}"),
    ("seeds", "{seeds}"), ("seeds below 20%", "{collapsed}"),
    ("summed: final test top-1 %", lambda r: _pct(r["top1"])),
    ("averaged at the same server step %", lambda r: _pct(r["averaged_top1"])),
    ("summed − averaged, points", lambda r: _interval(r["summed_minus_averaged"], 100)),
    ("seeds reaching the target: summed / averaged (Fisher exact p)", lambda r: "—" if r.get(
        "reached_fisher_p") is None else f"{r['reached_target']} / "
        f"{r['averaged_reached_target']} ({r['reached_fisher_p']:.2g})"),
    rows=lambda result: (result.get("summing") or {}).get("rows", []))


def asynchronous_summing(result) -> str:
  """The summing part's table, or nothing before it has run."""
  return _asynchronous_summing(result) if (result.get("summing") or {}).get("rows") else ""

asynchronous_step_times = per_row(
    ("step times", "{step_times}"), ("seeds", lambda r: len(r["seeds"])),
    ("final test top-1 %", lambda r: f"{100 * r['top1']:.1f} ± {100 * (r['top1_sd'] or 0):.1f}"),
    ("− lock-step, points", lambda r: _interval(r["minus_lockstep"], 100)),
    ("− synchronous, points", lambda r: _interval(r["minus_synchronous"], 100)),
    ("staleness: mean / 90th pct / max",
     lambda r: f"{r['staleness_mean']:.1f} / {r['staleness_90']:.1f} / {r['staleness_max']}"),
    ("speed-up over synchronous", lambda r: _speedup(r["speedup_over_synchronous"])),
    ("its wait", lambda r: _speedup(r["speedup_had_it_learned_as_lockstep"])),
    ("sooner than lock-step", lambda r: _speedup(r["sooner_than_lockstep"])),
    rows=lambda result: result.get("step_times", []))

def _control_rows(result):
  control = result.get("speeds_control")
  return control["arms"] if control else []


_CONTROL_COLUMNS = (
    ("staleness, mean", lambda r: "—" if r["staleness_mean"] is None else
     f"{r['staleness_mean']:.1f}"),
    ("final top-1 % (− lock-step, points)",
     lambda r: f"{_pct(r['top1'])} ({_interval(r['minus_lockstep'], 100)})"),
    ("sooner than lock-step", lambda r: _speedup(r["sooner_than_lockstep"])),
    ("time over the heavy-tailed runs'", lambda r: _speedup(r["time_over_heavy_tailed"])),
    ("of the gain (share of its log)", lambda r: f"{r['reproduces']}" + (
        "" if r["share_of_gain"] is None else f" ({r['share_of_gain']:.2f})")))

asynchronous_control = per_row(("arm", "{arm}"), *_CONTROL_COLUMNS, rows=_control_rows)

asynchronous_control_arms = per_row(
    ("arm (8 clients averaged, n_sync 4, seeds 0–4)", "{arm}"), ("what it changes", "{changes}"),
    *_CONTROL_COLUMNS, rows=_control_rows)


def _paine1_speeds_rows(result):
  found = result.get("step_times_paine1")
  return [found] if found else []


asynchronous_speeds_paine1 = per_row(
    ("Experiment 1's setting, heavy-tailed step times", lambda r: "8 clients averaged, n_sync 4"),
    ("final test top-1 % (minus lock-step, points)",
     lambda r: f"{_pct(r['top1'])} ({_interval(r['top1_minus_lockstep'], 100)})"),
    ("lock-step's time over theirs", lambda r: _speedup(r["time_lockstep_over_heavy_tailed"])),
    ("speed-up over one client, Blue Waters", lambda r: _speedup(r["speedup_over_one_client"])),
    ("lock-step's", lambda r: _speedup(r["lockstep_speedup_over_one_client"])),
    ("staleness, mean (pushes)", "{staleness_mean}"), rows=_paine1_speeds_rows)


asynchronous_boundary = per_row(
    ("server", "{server_rule}"), ("momentum", "{momentum}"), ("clients", "{clients}"),
    ("n_sync", "{n_sync}"), ("server's η/(1−β)", "{effective_step}"),
    ("seeds below 20%", lambda r: f"{r['collapsed']} of {r['seeds']}"),
    rows=lambda result: result.get("boundary", []))


TABLES = {"table1": (table1, "table1.json"),
          "expected_results": (expected_results, "table1.json"),
          **{f"asynchronous_{name}": (table, "asynchronous.json") for name, table in (
              ("verdicts", asynchronous_verdicts), ("rules", asynchronous_rules),
              ("staleness", asynchronous_staleness), ("control", asynchronous_control),
              ("control_arms", asynchronous_control_arms),
              ("speeds_paine1", asynchronous_speeds_paine1),
              ("reference", asynchronous_reference),
              ("synchronous", asynchronous_synchronous), ("momentum", asynchronous_momentum),
              ("paine1", asynchronous_paine1), ("paine2", asynchronous_paine2),
              ("paine3", asynchronous_paine3), ("su", asynchronous_su),
              ("su_rates", asynchronous_su_rates), ("validate", asynchronous_validate),
              ("overlap", asynchronous_overlap), ("preset", asynchronous_preset),
              ("preset_validation", asynchronous_preset_validation),
              ("where", asynchronous_where), ("largest_step", asynchronous_largest_step),
              ("summing", asynchronous_summing), ("step_times", asynchronous_step_times),
              ("boundary", asynchronous_boundary))},
          "owt_variants": (owt_variants, "owt_variants.json"),
          "large_batch": (large_batch, "large_batch.json"),
          "large_batch_grid": (large_batch_grid, "large_batch.json"),
          "large_batch_summary": (large_batch_summary, "large_batch.json"),
          "large_batch_goyal": (large_batch_goyal, "large_batch.json"),
          "large_batch_goyal_verdict": (large_batch_goyal_verdict, "large_batch.json")}

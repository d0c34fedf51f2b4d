"""The rules that turn benchmarks/papers/asynchronous.py's runs into findings: what each paper
claims, the test that decides it here, the numbers, and a verdict (reproduced, not_reproduced,
not_testable) — every rule written down before the runs it reads were made, except those
docs/asynchronous.md lists under "What changed after cbfaa8a" (the preset's choice, the boundary,
the largest step, the step times' effect, the averaging reading's rows and the early window's
chance test).

A run is a dict of asynchronous.json's `runs`: its setting's fields, `seed`, `eval_top1`
([[step, top-1], ...] over the test set), `final_eval_top1`, and for the probed runs `probe_loss`
and `probe_error` (one value a step: the evaluated model on a fixed 128 training images).

Statistics. Every comparison is paired by seed (a seed sets the initialisation, the data order and
dropout alike for both sides), and its 95% confidence interval is Student's t over the seeds'
differences: mean ± t(0.975, n−1)·sd/√n. A speed-up is a ratio of steps to a target, so its
interval is taken on log ratios and reported as a geometric mean. A comparison needs at least
MIN_PAIRS seeds on which both sides are defined; a baseline that never reaches its target leaves
its seed out (it would make any method look faster or slower by an infinite margin); a method that
never reaches the target where its baseline does counts against the method.
"""

import math
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from hybrid_parallel.local_sgd import asgd

# Student's t at 0.975 for 1–12 degrees of freedom (any table of the t distribution).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179)
MIN_PAIRS = 3

# The targets: a share of the tuned one-client reference's mean final test top-1 ("near the single
# GPU's accuracy", Paine et al.'s Experiment 1).
TARGET_SHARE = 0.95

# Where each paper's comparisons are priced (a run's `predicted_step_s` keys): Paine's on his
# Blue Waters nodes, Su's on Krizhevsky 2014's 8 K20s — both sides of a comparison on one machine.
PAINE, SU = "blue_waters", "k20s"


def interval(values: list[float]) -> dict | None:
  """Mean, sd and the 95% confidence interval of the mean of `values` (None for fewer than
  MIN_PAIRS)."""
  n = len(values)
  if n < MIN_PAIRS:
    return None
  mean, sd = statistics.mean(values), statistics.stdev(values)
  half = _T975[n - 2] * sd / math.sqrt(n)
  return {"n": n, "mean": round(mean, 5), "sd": round(sd, 5),
          "ci95": [round(mean - half, 5), round(mean + half, 5)]}


def above(ci: dict | None, value: float = 0.0) -> bool | None:
  """Whether the whole interval lies above `value` (None: no interval)."""
  return None if ci is None else ci["ci95"][0] > value


def below(ci: dict | None, value: float = 0.0) -> bool | None:
  return None if ci is None else ci["ci95"][1] < value


def paired(a: dict, b: dict, key) -> dict | None:
  """The interval of `key(run_a) − key(run_b)` over the seeds both `a` and `b` (seed → run) have
  and on which both values are defined."""
  differences = []
  for seed in sorted(set(a) & set(b)):
    x, y = key(a[seed]), key(b[seed])
    if x is not None and y is not None:
      differences.append(x - y)
  return interval(differences)


def steps_to(run: dict, target: float) -> float:
  """The client steps at which the run's test top-1 first reaches `target`, interpolated
  linearly between the evaluation below it and the first at or above it (math.inf: never)."""
  previous = (0, 0.0)
  for step, top1 in run["eval_top1"]:
    if top1 >= target:
      (s0, v0) = previous
      return s0 + (step - s0) * (target - v0) / (top1 - v0) if top1 > v0 else float(step)
    previous = (step, top1)
  return math.inf


def time_to(run: dict, target: float) -> float:
  """The run's time (mean client steps) to `target`: its steps where its clients kept step,
  its evaluations' times (`eval_time`) where they did not."""
  if "eval_time" not in run:
    return steps_to(run, target)
  return steps_to({"eval_top1": [[t, v] for t, (_, v) in zip(run["eval_time"], run["eval_top1"])]},
                  target)


def speedup(baseline: dict, method: dict, target: float, *, baseline_step_s: float = 1.0,
            method_step_s: float = 1.0) -> dict:
  """How much sooner `method` (seed → run) reaches `target` than `baseline` (seed → run), each
  step priced at its `*_step_s`: per seed, the log of the baseline's time over the method's (a
  run's time is its steps, or its evaluations' times where its clients kept their own speeds:
  `time_to`).

  A seed whose baseline never reaches the target is left out (`baseline_missed`); a seed whose
  method never does while its baseline does is `method_missed`, and then the method is not faster
  on that seed whatever the others say.

  Returns:
    {"geometric_mean", "ci95" (of the speed-up), "n", "baseline_missed", "method_missed",
     "per_seed"}; the interval is None with fewer than MIN_PAIRS usable seeds.
  """
  logs, per_seed, baseline_missed, method_missed = [], {}, [], []
  for seed in sorted(set(baseline) & set(method)):
    t_base = time_to(baseline[seed], target) * baseline_step_s
    t_method = time_to(method[seed], target) * method_step_s
    if math.isinf(t_base):
      baseline_missed.append(seed)
    elif math.isinf(t_method):
      method_missed.append(seed)
    else:
      logs.append(math.log(t_base / t_method))
      per_seed[seed] = round(t_base / t_method, 3)
  ci = interval(logs)
  return {"geometric_mean": round(math.exp(statistics.mean(logs)), 3) if logs else None,
          "ci95": None if ci is None else [round(math.exp(v), 3) for v in ci["ci95"]],
          "n": len(logs), "baseline_missed": baseline_missed, "method_missed": method_missed,
          "per_seed": per_seed}


def faster(result: dict) -> bool | None:
  """Reproduced-or-not of "the method is faster" from a `speedup` result: None (not testable)
  when fewer than MIN_PAIRS seeds have a baseline that reached the target, False when the method
  missed the target on a seed whose baseline reached it, else whether the speed-up's interval
  lies above 1."""
  if result["n"] + len(result["method_missed"]) < MIN_PAIRS:
    return None
  if result["method_missed"]:
    return False
  return result["ci95"] is not None and result["ci95"][0] > 1.0


def verdict(holds: bool | None) -> str:
  return {True: "reproduced", False: "not_reproduced", None: "not_testable"}[holds]


# --- Curves ---------------------------------------------------------------------------------


def probed(run: dict) -> bool:
  """Whether the run has a whole probe curve (it was probed and did not diverge)."""
  return "probe_loss" in run and run.get("diverged_at_step") is None


def on_probe(function):
  """`function(run)`, or None for a run without a whole probe curve (a comparison leaves its
  seed out: `paired`)."""
  return lambda run: function(run) if probed(run) else None


def mean_over(values: list[float], start: int, stop: int) -> float:
  return statistics.mean(values[start:stop])


def slope_per_100_steps(values: list[float], start: int, stop: int) -> float:
  """Least-squares slope of values[start:stop] against the step, per 100 steps."""
  xs = list(range(start, stop))
  ys = values[start:stop]
  mx, my = statistics.mean(xs), statistics.mean(ys)
  return 100 * (sum((x - mx) * (y - my) for x, y in zip(xs, ys)) /
                sum((x - mx) ** 2 for x in xs))


ROUGHNESS_WINDOW = 33  # steps: longer than the largest n_sync (32), so a zigzag of that period
# shows as a deviation from the moving average rather than being followed by it.


def roughness(values: list[float], start: int, stop: int) -> float:
  """Jaggedness of a per-step curve: the RMS of its deviation from its own centred moving
  average over ROUGHNESS_WINDOW steps, over values[start:stop] (the window kept inside)."""
  half = ROUGHNESS_WINDOW // 2
  deviations = []
  for i in range(max(start, half), min(stop, len(values) - half)):
    window = values[i - half:i + half + 1]
    deviations.append(values[i] - statistics.mean(window))
  return math.sqrt(statistics.mean(d * d for d in deviations))


# --- Selecting runs ---------------------------------------------------------------------------


def select(runs: list[dict], **fields) -> dict:
  """seed → run of the runs whose fields equal `fields`."""
  return {r["seed"]: r for r in runs if all(r.get(k) == v for k, v in fields.items())}


def mean_final(runs: dict) -> float:
  return statistics.mean(r["final_eval_top1"] for r in runs.values())


STUDY_SEEDS = range(5)  # the seeds every choice and finding is made on; `validate` uses others.


# --- The papers' claims -----------------------------------------------------------------------


def findings(runs: list[dict], chosen: dict, time_model: dict) -> list[dict]:
  """Each of the papers' claims against the runs: reproduced, not_reproduced or not_testable,
  each with its rule (`test`) and the numbers that decide it (`evidence`). A claim whose runs are
  not there yet is left out."""
  found = []
  runs = [r for r in runs if r["seed"] in STUDY_SEEDS or r["part"] == "validate"]

  def add(claim, source, holds, test, evidence):
    found.append({"claim": claim, "source": source, "verdict": verdict(holds), "test": test,
                  "evidence": evidence})

  target = chosen.get("target_top1")
  # Paine reads two ways: his server may have added each client's change whole (Downpour's
  # "sum", the reading fixed before the runs) or their mean ("average", read after the summing
  # reading collapsed). Each verdict below names its reading.
  summed = {}
  paine_first = len(found)  # the summing row, the reading fixed before the runs, goes first.
  averaging = ("the averaging reading (taken after the summing runs collapsed: direction only, "
               "weaker evidence than a rule fixed before)")
  # Experiment 1: 8 clients against one, in wall-clock priced on Blue Waters.
  for n, where in ((4, "n_sync 4 (4.5% of an epoch, his 6%)"),
                   (32, "n_sync 32 (3.2 momentum horizons; his 600 are 60)")):
    result = experiment1_speedup(runs, chosen, server_rule="sum", n_sync=n)
    averaged = experiment1_speedup(runs, chosen, server_rule="average", n_sync=n)
    if result is not None:
      summed[f"experiment 1, n_sync {n}: speed-up"] = result
    if averaged is None:
      continue
    add(f"8 clients reach the single GPU's accuracy sooner in wall-clock (his: about 3.2×; "
        f"{where}; his 3.2× is not comparable) — {averaging}",
        "Paine et al., Experiment 1 (Fig. 1)", faster(averaged),
        f"each client at the one-client rate and momentum 0.9, the server averaging the clients' "
        f"changes (the paper does not state its server's rule; this reading was taken after the "
        f"summing reading collapsed, under the rule fixed before the runs): the time to "
        f"{100 * target:.1f}% test top-1 ({100 * TARGET_SHARE:.0f}% of the one client's plateau) "
        f"of one client over that of 8, the same schedule of 1,080 client steps, each step "
        f"priced on Blue Waters; reproduced if the speed-up's 95% interval over seeds lies "
        f"above 1; lock-step clients (every push n_sync steps stale)",
        {"speedup_averaging": averaged})
  # Experiment 1 again with clients at their own, heavy-tailed speeds (the `speeds_paine1` part).
  uneven = experiment1_speedup(runs, chosen, part="speeds_paine1", server_rule="average",
                               n_sync=4, step_times="heavy_tailed")
  lockstep = experiment1_speedup(runs, chosen, server_rule="average", n_sync=4)
  if uneven is not None:
    eight = select(runs, part="speeds_paine1", step_times="heavy_tailed")
    locked = select(runs, part="paine1", server_rule="average", n_sync=4)
    add(f"8 clients reach the single GPU's accuracy sooner in wall-clock (his: about 3.2×; "
        f"n_sync 4), clients at heavy-tailed speeds — {averaging}",
        "Paine et al., Experiment 1 (Fig. 1); his nodes were alike, most users' are not",
        faster(uneven),
        f"as the lock-step row, each client's every step drawn lognormal (σ 1, mean 1: "
        f"asgd.py's heavy_tailed), pushes applied in arrival order, the run as long in time "
        f"(mean client steps) as lock-step's 1,080 steps; the time to {100 * target:.1f}% of "
        f"one client over that of 8, both priced on Blue Waters' step; reproduced if the "
        f"speed-up's interval lies above 1. Beside it, seed-paired against the lock-step "
        f"clients: final test top-1 and the ratio of their times to the target",
        {"speedup_averaging": uneven,
         "top1_minus_lockstep": paired(eight, locked, lambda r: r["final_eval_top1"]),
         "time_lockstep_over_heavy_tailed": _log_ratio(
             {s: (time_to(locked[s], target), time_to(eight[s], target))
              for s in sorted(set(eight) & set(locked))}),
         "staleness_mean": _mean_defined(r["staleness"]["staleness_mean"]
                                         for r in eight.values()),
         "lockstep_speedup": lockstep})
  # Experiment 2: a cold start.
  for n in (4, 32):
    one2 = select(runs, part="paine2", clients=1)
    many = {rule: select(runs, part="paine2", clients=32, server_rule=rule, n_sync=n)
            for rule in ("sum", "average")}
    if not (one2 and many["average"]):
      continue
    steps = len(next(iter(one2.values()))["probe_loss"])
    early = on_probe(lambda r: mean_over(r["probe_loss"], 0, steps // 10))
    late = on_probe(lambda r: slope_per_100_steps(r["probe_loss"], steps // 2, steps))
    cells = {rule: {"early_loss_32_minus_1": paired(m, one2, early),
                    "late_slope_32_minus_1": paired(m, one2, late)} for rule, m in many.items()}
    summed[f"experiment 2, n_sync {n}: 32 clients minus one"] = cells["sum"]
    averaged = cells["average"]
    both_sides = list(one2.values()) + list(many["average"].values())
    at_chance = all(abs(early(r) - CHANCE_LOSS) <= CHANCE_LOSS_TOLERANCE for r in both_sides
                    if early(r) is not None)
    add(f"with a cold start more clients learn slower at first (n_sync {n}) — {averaging}",
        "Paine et al., Experiment 2 (Fig. 2: 16 and 32 clients)",
        None if at_chance else above(averaged["early_loss_32_minus_1"]),
        "32 clients against one, the server averaging, loss of the server's model on 128 fixed "
        "training images over the first tenth of the run: higher (interval of the seed-paired "
        "difference above 0); not testable where every run of both sides is still at chance's "
        f"loss there (within {CHANCE_LOSS_TOLERANCE} of ln 10), since neither side has begun to "
        "learn; lock-step clients",
        {"averaging": {"early_loss_32_minus_1": averaged["early_loss_32_minus_1"],
                       "every run at chance": at_chance}})
    add(f"with a cold start more clients learn faster later (n_sync {n}) — {averaging}",
        "Paine et al., Experiment 2 (Fig. 2: 16 and 32 clients)",
        below(averaged["late_slope_32_minus_1"]),
        "32 clients against one, the server averaging, loss of the server's model on 128 fixed "
        "training images after every step: falling faster over the second half of the run "
        "(least-squares slope per 100 steps; interval of the seed-paired difference below 0); "
        "lock-step clients",
        {"averaging": {"late_slope_32_minus_1": averaged["late_slope_32_minus_1"]}})
  # Experiment 3: a warm start for half the run.
  one3 = select(runs, part="paine3", clients=1)
  warm = lambda n, rule="sum": select(runs, part="paine3", clients=8, n_sync=n,
                                      warm_start_momentum=True, server_rule=rule)
  if one3 and all(warm(n) for n in N_SYNCS_ASYNCHRONOUS):
    steps = len(next(iter(one3.values()))["probe_loss"])
    late_error = on_probe(lambda r: mean_over(r["probe_error"], steps - steps // 10, steps))
    jagged = on_probe(lambda r: roughness(r["probe_loss"], steps // 2, steps))
    summed["experiment 3: late error 8 minus 1"] = {
        f"n_sync {n}": paired(warm(n), one3, late_error) for n in N_SYNCS_ASYNCHRONOUS}
    per_day = time_model["steps_per_day"]
    fewer = per_day[100] < per_day[900]
    for rule, reading, n_syncs in (("sum", "the summing reading", N_SYNCS_ASYNCHRONOUS),
                                   ("average", "the averaging reading", PAINE3_AVERAGED)):
      if not all(warm(n, rule) for n in n_syncs):
        continue
      if rule == "average":
        lower = {f"n_sync {n}": paired(warm(n, rule), one3, late_error) for n in n_syncs}
        add(f"with a warm start more clients reach a lower training error at every n_sync — "
            f"{reading}", "Paine et al., Experiment 3 (Fig. 3)",
            _all(below(ci) for ci in lower.values()),
            f"8 clients against one after a warm start of half the run, the server averaging: "
            f"the training error of the server's model on 128 fixed training images over the last "
            f"tenth of the run; reproduced if at n_sync {' and '.join(map(str, n_syncs))} the "
            f"interval of the seed-paired difference lies below 0; lock-step clients",
            {"late_error_8_minus_1": lower})
      rough = paired(warm(n_syncs[-1], rule), warm(n_syncs[0], rule), jagged)
      collapse = " (not testable for the summing collapse: the first row)" if rule == "sum" else ""
      add(f"larger n_sync gives jagged training curves (stale updates) — {reading}{collapse}",
          "Paine et al., Experiment 3 (Fig. 3, 4)", above(rough),
          f"8 clients after the warm start, the server {'summing' if rule == 'sum' else 'averaging'}: "
          f"the RMS deviation of the server's per-step probe loss from its own "
          f"{ROUGHNESS_WINDOW}-step moving average, n_sync {n_syncs[-1]} minus n_sync "
          f"{n_syncs[0]} (seed-paired); reproduced if its interval lies above 0; lock-step clients",
          {f"roughness_{n_syncs[-1]}_minus_{n_syncs[0]}": rough,
           "roughness": {f"n_sync {n}": _mean_defined(jagged(r) for r in warm(n, rule).values())
                         for n in n_syncs}})
      stale = paired(warm(n_syncs[0], rule), warm(n_syncs[-1], rule), late_error)
      add(f"n_sync 100 processes fewer minibatches in 24 h than 900, yet ends at a lower error — "
          f"{reading}{collapse}", "Paine et al., Experiment 3 (Fig. 4)", _both(below(stale), fewer),
          f"8 clients after the warm start: late training error at n_sync {n_syncs[0]} minus "
          f"n_sync {n_syncs[-1]} (8× apart as his 100 and 900), interval below 0; and fewer "
          f"steps a day at n_sync 100 than 900 on Blue Waters — the time model's prediction, not "
          f"a measurement; lock-step clients",
          {f"late_error_{n_syncs[0]}_minus_{n_syncs[-1]}": stale,
           "predicted_steps_per_day": per_day})
  if summed:
    paine_rows = found[paine_first:]
    del found[paine_first:]
    grid = summing_grid(runs)
    add("Experiments 1, 2 and 3 under the summing reading: 8 or 32 clients at the one-client "
        "rate, the server adding every client's change — one finding, three views of it",
        "Paine et al., Experiments 1–3 (the reading fixed before the runs)",
        False if any(_summing_fails(v) for v in summed.values()) else None,
        "the rules of each experiment as under the averaging reading, the server summing; not "
        "reproduced if any experiment's rule fails where its runs are finite. A summing server "
        "at the one-client rate moves D × that client's step (here 8 × 0.125 = 1 as an "
        "effective step η/(1−β)), and once updates are stale (n_sync ≥ 4) every setting of 4 "
        "clients or more at the one-client rate ends at chance; at an equal server step (1 at "
        "n_sync 4) averaging still learned where summing did not. " +
        _summing_at_its_own_rate(grid) +
        "; lock-step clients",
        {**summed, **({"summing at its own rate": {
            f"rate {row['learning_rate']}": row["top1"] for row in grid["rows"]}}
            if grid else {})})
    own_rate = chosen.get("summing_rate")
    for n in (4, 32):
      result = experiment1_speedup(runs, chosen, part="summing", server_rule="sum", n_sync=n,
                                   learning_rate=own_rate)
      if result is None:
        continue
      add(f"8 clients reach the single GPU's accuracy sooner in wall-clock (his: about 3.2×; "
          f"n_sync {n}) — the summing reading, each client at the rate the summing part chose "
          f"for the sum", "Paine et al., Experiment 1 (Fig. 1)", faster(result),
          f"as the averaging rows, the server summing and each client at {own_rate} (the "
          f"summing part's choice, 1/{chosen['one_client_rate'] / own_rate:.3g} of the "
          f"one-client rate, where Paine's clients ran the single-GPU settings): the time to "
          f"{100 * target:.1f}% of one client over that of 8 on the same 1,080-step schedule, "
          f"both priced on Blue Waters; reproduced if the speed-up's interval lies above 1; "
          f"lock-step clients",
          {"speedup_summing": result,
           "top1": round(mean_final(select(runs, part="summing", steps=1080, n_sync=n,
                                           learning_rate=own_rate)), 4)})
    found.extend(paine_rows)
  # Su et al., against the one client on their schedule.
  target = chosen.get("su_target_top1")
  if target and select(runs, part="reference", steps=540):
    over_one, over_every_step = {}, {}
    for method in ("allreduce", "butterfly", "hopping_ring"):
      for d in (4, 8):
        cells = {e: su_speedups(runs, chosen, method=method, replicas=d, every=e)
                 for e in (1, 4, 16)}
        if any(cell is None for cell in cells.values()):
          continue
        over_one[f"{method}, {d}"] = {f"every {e}": cells[e][0] for e in (1, 4, 16)}
        over_every_step[f"{method}, {d}"] = {f"every {e}": cells[e][1] for e in (4, 16)}
    if over_one:
      add("every way of averaging — all-reduce, butterfly, ring, hopping ring — speeds training "
          "up over one GPU", "Su, Chen & Morgan (a draft: the methods and the claim, no results)",
          _all(_any(faster(r) for r in cell.values()) for cell in over_one.values()),
          f"for every method and replica count (4, 8), some averaging interval (1, 4, 16 steps) "
          f"reaches {100 * target:.1f}% test top-1 sooner than one client, in time priced on "
          f"8 K20s, with the speed-up's 95% interval above 1 (the draft names ring reduce but "
          f"does not define it; taken as a ring all-reduce, its accuracy and price are "
          f"allreduce's by construction, so three methods were trained)",
          {"speedup_over_one_client": over_one})
      add("averaging every few minibatches trains faster than averaging every minibatch",
          "this study's hypothesis of why one averages less often (Su et al.'s draft averages "
          "\"every few minibatches\" and states no result)",
          _all(_any(faster(r) for r in cell.values()) for cell in over_every_step.values()),
          "for every method and replica count, averaging every 4 or 16 steps reaches the target "
          "sooner (priced on 8 K20s) than averaging every step, interval above 1; a seed whose "
          "every-step run never reaches the target is left out, and a cell with fewer than 3 "
          "usable seeds is not testable",
          {"speedup_over_every_step": over_every_step})
  add("8 clients at n_sync 600 reach epoch 22 in 3.3 days (one K20X: 10.7 days)",
      "Paine et al., Experiment 1", None,
      "not testable here: the accuracy is ImageNet's, and the time needs the epochs of the "
      "single-GPU run, which the paper does not give; the time model's days for 22 × 10,009 "
      "steps of a client among 8, calibrated on 10.7 days taken as 90 epochs, are beside it",
      {"predicted_days": time_model["days_22_epochs_n_sync_600"], "paper_days": 3.3,
       "predicted_client_step_s": time_model["client_step_s_n_sync_600"]})
  return found


def experiment1_speedup(runs: list[dict], chosen: dict, *, part: str = "paine1",
                        **fields) -> dict | None:
  """Paine's Experiment 1: 8 clients (the runs of `part` on the 1,080-step schedule whose fields
  equal `fields`: `paine1` in lock-step, `speeds_paine1` at drawn step times, `summing` at the
  summing part's rate) against the one-client reference on the same schedule, both priced on
  Blue Waters (`speedup`); None before either has run."""
  target = chosen.get("target_top1")
  one = select(runs, part="reference", steps=1080, learning_rate=chosen.get("one_client_rate"))
  eight = select(runs, part=part, steps=1080, **fields)
  if not (one and eight and target):
    return None
  return speedup(one, eight, target, baseline_step_s=_step_s(one, PAINE),
                 method_step_s=_step_s(eight, PAINE))


def su_speedups(runs: list[dict], chosen: dict, *, method: str, replicas: int,
                every: int) -> tuple[dict, dict | None] | None:
  """Su's averaging `method` on `replicas` every `every` steps at the rate allreduce chose for
  it: its speed-up over the one client on the same schedule, and over the same method averaging
  every step (None for every step itself), priced on 8 K20s; None before its runs exist."""
  target = chosen.get("su_target_top1")
  rates = chosen.get("su_rates", {})
  cell = lambda e: select(runs, part="su", average_method=method, clients=replicas,
                          sync_every=e, learning_rate=rates.get(f"{replicas}, {e}"))
  one, runs_here, every_step = select(runs, part="reference", steps=540), cell(every), cell(1)
  if not (target and one and runs_here and every_step):
    return None
  price = lambda side: _step_s(side, SU)
  over_one = speedup(one, runs_here, target, baseline_step_s=price(one),
                     method_step_s=price(runs_here))
  over_every_step = None if every == 1 else speedup(
      every_step, runs_here, target, baseline_step_s=price(every_step),
      method_step_s=price(runs_here))
  return over_one, over_every_step


def _mean_defined(values) -> float | None:
  defined = [v for v in values if v is not None]
  return round(statistics.mean(defined), 5) if defined else None


N_SYNCS_ASYNCHRONOUS = (4, 16, 32)
# A model that predicts every class alike has a loss of ln 10 on digits; Experiment 2's first
# tenth is "at chance" on a run within CHANCE_LOSS_TOLERANCE of it. In asynchronous.json the one
# client's and 32 averaged clients' first-tenth means lie within 0.015 of it on every seed; 0.05
# is under half the drop the fastest of them show over the next tenth (to 2.18–2.19).
CHANCE_LOSS = math.log(10)
CHANCE_LOSS_TOLERANCE = 0.05
PAINE3_AVERAGED = (4, 32)  # Experiment 3 averaged: the smallest and largest stale n_sync.


def _summing_fails(evidence: dict) -> bool:
  """Whether one experiment's summing evidence fails its rule: a speed-up not faster, a cold
  start's later slope not below one client's, or a warm start's error not below one client's."""
  if "geometric_mean" in evidence:
    return faster(evidence) is False
  if "late_slope_32_minus_1" in evidence:
    return below(evidence["late_slope_32_minus_1"]) is False
  return any(below(ci) is False for ci in evidence.values())


N_SYNCS = (1, 4, 16, 32)


def _summing_at_its_own_rate(grid: dict | None) -> str:
  """What the `summing` part (8 clients summed at n_sync 4, client rates on a grid of server
  steps) says beside the collapse: the rate its rule chose, and summed − averaged at each server
  step the momentum sweep also averaged."""
  if not grid:
    return "Whether the step or the rule is the cause is not tested: the summing part has not run"
  best = next(r for r in grid["rows"] if r["learning_rate"] == grid["chosen_rate"])
  paired_rows = [r for r in grid["rows"] if r["summed_minus_averaged"]]
  text = (f"At the client rate the summing part chose for the sum ({best['learning_rate']}, a "
          f"server step of {best['server_effective_step']:g}, the best of "
          f"{len(grid['rows'])} on its grid) 8 summed clients at n_sync 4 end its 450 steps at "
          f"{100 * best['top1']:.1f}% ({best['collapsed']} of {best['seeds']} seeds below 20%)")
  if paired_rows:
    gaps = [100 * r["summed_minus_averaged"]["mean"] for r in paired_rows]
    steps = ", ".join(f"{r['server_effective_step']:g}" for r in paired_rows)
    text += (f"; at the server steps the sweep also averaged ({steps}) summing ended "
             f"{-max(gaps):.0f} to {-min(gaps):.0f} points below averaging")
  return text


def _step_s(runs: dict, machine: str) -> float:
  return next(iter(runs.values()))["predicted_step_s"][machine]


def _both(a, b):
  return None if a is None or b is None else a and b


def _all(values):
  values = list(values)
  if any(v is False for v in values):
    return False
  return None if not values or any(v is None for v in values) else True


def _any(values):
  values = list(values)
  if any(v is True for v in values):
    return True
  return None if any(v is None for v in values) else False


# --- The study's own results: momentum at equal effective step, and what cannot learn --------


def momentum_effect(runs: list[dict]) -> list[dict]:
  """For each effective step and n_sync of the `momentum` part: the final test top-1 of momentum
  0.9 minus momentum 0 at the same η/(1 − β), paired by seed."""
  rows = []
  sweep = [r for r in runs if r["part"] == "momentum" and r["seed"] in STUDY_SEEDS]
  for n in N_SYNCS:
    for step in sorted({r["effective_step"] for r in sweep}):
      cell = {beta: select(sweep, n_sync=n, effective_step=step, momentum=beta)
              for beta in (0.0, 0.9)}
      if all(cell.values()):
        rows.append({"n_sync": n, "effective_step": step,
                     "top1_momentum_0": round(mean_final(cell[0.0]), 4),
                     "top1_momentum_0.9": round(mean_final(cell[0.9]), 4),
                     "difference": paired(cell[0.9], cell[0.0], lambda r: r["final_eval_top1"])})
  return rows


COLLAPSE_TOP1 = 0.2  # twice chance on 10 classes: a run that ends below it has not learned.


COLLAPSE_PARTS = ("momentum", "staleness", "summing", "paine1", "paine2")  # A-SGD, cold start,
# lock-step clients.


def _at_least_as_far_out(setting: dict, collapse: dict) -> bool:
  return (setting["server_rule"] == collapse["server_rule"] and
          setting["momentum"] == collapse["momentum"] and
          setting["clients"] >= collapse["clients"] and setting["n_sync"] >= collapse["n_sync"] and
          setting["effective_step"] >= collapse["effective_step"])


# --- The preset, the largest step, the summing server at its own rate, clients' own speeds -----

PRESET_PRICE = "h100_node"  # the preset is chosen by time on one 8-GPU node (the same 8 devices).


def _sweep_cell(runs: list[dict], label: str) -> dict:
  return {s: r for s, r in select(runs, part="momentum", label=label).items()
          if s in STUDY_SEEDS}


def _synchronous(runs: list[dict], chosen: dict) -> dict:
  return {s: r for s, r in select(runs, part="synchronous",
                                  learning_rate=chosen.get("synchronous_rate")).items()
          if s in STUDY_SEEDS}


def preset_choice(runs: list[dict], chosen: dict) -> dict | None:
  """configs/asgd8.py's setting, by time to accuracy and final accuracy against synchronous data
  parallelism on the same 8 devices: among the momentum sweep's stale settings (n_sync ≥ 4)
  that reach the target on every seed, the one with the shortest time to it priced on one H100
  node (the highest geometric-mean speed-up over synchronous training); where another's speed-up
  lies inside that one's 95% interval, the higher mean final test top-1 of the two decides.
  Seeds 0–4; None before the sweep and the synchronous part have run."""
  target, sync = chosen.get("target_top1"), _synchronous(runs, chosen)
  sweep = [r for r in runs if r["part"] == "momentum" and r["seed"] in STUDY_SEEDS and
           r["n_sync"] >= 4]
  if not (target and sync and sweep):
    return None
  price = lambda side: _step_s(side, PRESET_PRICE)
  cells = []
  for label in dict.fromkeys(r["label"] for r in sweep):
    cell = _sweep_cell(runs, label)
    result = speedup(sync, cell, target, baseline_step_s=price(sync), method_step_s=price(cell))
    if result["method_missed"] or not result["geometric_mean"]:
      continue
    first = next(iter(cell.values()))
    cells.append({"label": label, "n_sync": first["n_sync"], "momentum": first["momentum"],
                  "learning_rate": first["learning_rate"],
                  "top1": round(mean_final(cell), 4), "speedup_over_synchronous": result,
                  "top1_minus_synchronous": paired(cell, sync, lambda r: r["final_eval_top1"])})
  if not cells:
    return None
  fastest = max(cells, key=lambda c: c["speedup_over_synchronous"]["geometric_mean"])
  low, high = fastest["speedup_over_synchronous"]["ci95"] or (math.inf, -math.inf)
  tied = [c for c in cells if c is fastest or
          low <= c["speedup_over_synchronous"]["geometric_mean"] <= high]
  choice = max(tied, key=lambda c: (c["top1"], c is fastest))
  return {**choice, "synchronous_top1": round(mean_final(sync), 4),
          "faster_than_synchronous": faster(choice["speedup_over_synchronous"]),
          "candidates": len(cells)}


def preset_validation(runs: list[dict], chosen: dict) -> dict | None:
  """configs/asgd8.py against synchronous data parallelism on the validation seeds (5–9, which
  did not choose its setting): final test top-1 (seed-paired difference) and time to the
  target priced on one H100 node."""
  preset = select(runs, part="validate", label="configs/asgd8.py")
  sync = select(runs, part="validate", scheme="data")
  target = chosen.get("target_top1")
  if not (preset and sync and target):
    return None
  price = lambda side: _step_s(side, PRESET_PRICE)
  return {"seeds": sorted(preset), "n_sync": next(iter(preset.values()))["n_sync"],
          "top1": [r["final_eval_top1"] for r in preset.values()],
          "synchronous_top1": [r["final_eval_top1"] for r in sync.values()],
          "top1_minus_synchronous": paired(preset, sync, lambda r: r["final_eval_top1"]),
          "speedup_over_synchronous": speedup(sync, preset, target, baseline_step_s=price(sync),
                                              method_step_s=price(preset))}


LARGEST_STEP = 1.0  # the sweep's largest effective step, where "staleness does not simply hurt".


def largest_step(runs: list[dict]) -> dict | None:
  """Momentum 0.9 at η/(1−β) 1 at n_sync 1 (synchronous SGD's update) and 4, on the sweep's
  seeds and the `staleness` part's: how many runs of each collapse (end below COLLAPSE_TOP1),
  and the seed-paired difference n_sync 4 − n_sync 1 in final test top-1; data parallelism at
  the same rate (the synchronous program) beside them."""
  cell = lambda n: select([r for r in runs if r["part"] in ("momentum", "staleness")],
                          n_sync=n, momentum=0.9, effective_step=LARGEST_STEP)
  one, four = cell(1), cell(4)
  if not (one and four):
    return None
  data = select(runs, part="synchronous", learning_rate=round(LARGEST_STEP * 0.1, 6))
  collapses = lambda c: sum(r["final_eval_top1"] < COLLAPSE_TOP1 for r in c.values())
  difference = paired(four, one, lambda r: r["final_eval_top1"])
  return {"seeds": sorted(set(one) & set(four)),
          "collapsed": {"n_sync 1": f"{collapses(one)} of {len(one)}",
                        "n_sync 4": f"{collapses(four)} of {len(four)}",
                        "data parallelism": f"{collapses(data)} of {len(data)}"},
          "top1": {"n_sync 1": round(mean_final(one), 4), "n_sync 4": round(mean_final(four), 4),
                   "data parallelism": round(mean_final(data), 4) if data else None},
          "n_sync_4_minus_1": difference,
          "staleness_helps": above(difference)}


def server_effective_step(run: dict) -> float:
  """An A-SGD run's server step η/(1 − β), times the clients when the server sums; from the
  rate, not the run's `effective_step` (rounded to 6 places: 8 × 0.007813 is not 0.0625)."""
  share = run["clients"] if run["server_rule"] == "sum" else 1
  return round(share * run["learning_rate"] / (1 - run["momentum"]), 5)


# The summing part's grid runs the sweep's schedule; its Experiment 1 runs 1,080 steps.
SUMMING_GRID_STEPS = 450


def summing_grid(runs: list[dict]) -> dict | None:
  """8 clients summed at n_sync 4 (the `summing` part) at each client rate, and the rate the
  best mean final test top-1 chooses; beside each, the averaging server at the same server
  effective step (the momentum sweep), seed-paired."""
  part = [r for r in runs if r["part"] == "summing" and r["steps"] == SUMMING_GRID_STEPS]
  if not part:
    return None
  rows = []
  for label in dict.fromkeys(r["label"] for r in part):
    cell = select(part, label=label)
    first = next(iter(cell.values()))
    server_step = server_effective_step(first)
    averaged = _sweep_cell(runs, f"β 0.9, η/(1−β) {server_step}, n_sync 4")
    rows.append({"learning_rate": first["learning_rate"], "server_effective_step": server_step,
                 "top1": round(mean_final(cell), 4), "seeds": len(cell),
                 "collapsed": sum(r["final_eval_top1"] < COLLAPSE_TOP1 for r in cell.values()),
                 "averaged_top1": round(mean_final(averaged), 4) if averaged else None,
                 "summed_minus_averaged": paired(cell, averaged, lambda r: r["final_eval_top1"])})
  best = max(rows, key=lambda r: (r["top1"], -r["learning_rate"]))
  return {"rows": rows, "chosen_rate": best["learning_rate"]}


def synchronous_time(step_times: str, *, seed: int, clients: int, steps: float) -> float:
  """The time (mean client steps) synchronous data parallelism takes for `steps` steps when its
  devices' step times are drawn as asgd.py's clients' (the same seed): each step waits for the
  slowest device; a fraction of a step is that fraction of it."""
  if math.isinf(steps):
    return math.inf
  whole = int(math.floor(steps))
  draws = jax.vmap(lambda k: asgd.step_durations(step_times, seed=seed,
                                                 clients=jnp.arange(clients), step=k))(
      jnp.arange(1, whole + 2))
  slowest = np.asarray(draws).max(axis=1)
  return float(slowest[:whole].sum() + (steps - whole) * slowest[whole])


def step_times_effect(runs: list[dict], chosen: dict) -> list[dict]:
  """The `speeds` part: configs/asgd8.py's setting with clients at their own speeds, against the
  same setting in lock-step (the momentum sweep, seed-paired) in final test top-1, and against
  synchronous data parallelism at its tuned rate whose devices' steps take the same draws (each
  step waits for the slowest) in time to the target; with the staleness each saw."""
  target, sync = chosen.get("target_top1"), _synchronous(runs, chosen)
  rows = []
  for label in dict.fromkeys(r["label"] for r in runs if r["part"] == "speeds"):
    cell = select(runs, part="speeds", label=label)
    first = next(iter(cell.values()))
    lockstep = _sweep_cell(runs, label.rsplit(", ", 1)[0])
    times = {}
    for seed in sorted(set(cell) & set(sync)):
      mine = time_to(cell[seed], target)
      theirs = synchronous_time(first["step_times"], seed=seed, clients=first["clients"],
                                steps=steps_to(sync[seed], target))
      times[seed] = (theirs, mine)
    logs = [math.log(a / b) for a, b in times.values() if math.isfinite(a) and math.isfinite(b)]
    ci = interval(logs)
    stale = [r["staleness"] for r in cell.values()]
    # The speed-up mixes two effects: synchronous training's wait for its slowest device, and
    # A-SGD at these step times reaching the target in fewer mean client steps than lock-step
    # (data order and irregular pushes differ). Each apart, seed-paired: lock-step's steps over
    # these runs' time, and synchronous training's drawn time over lock-step's steps (the
    # speed-up had these runs learned as lock-step did).
    paired_seeds = sorted(set(cell) & set(sync) & set(lockstep))
    over_lockstep = _log_ratio({s: (steps_to(lockstep[s], target), time_to(cell[s], target))
                                for s in paired_seeds})
    as_lockstep = _log_ratio({s: (times[s][0], steps_to(lockstep[s], target))
                              for s in paired_seeds})
    rows.append({
        "step_times": first["step_times"], "label": label, "seeds": sorted(cell),
        "top1": round(mean_final(cell), 4),
        "top1_sd": round(statistics.stdev(r["final_eval_top1"] for r in cell.values()), 4)
        if len(cell) > 1 else None,
        "lockstep_top1": round(mean_final(lockstep), 4) if lockstep else None,
        "minus_lockstep": paired(cell, lockstep, lambda r: r["final_eval_top1"]),
        "minus_synchronous": paired(cell, sync, lambda r: r["final_eval_top1"]),
        "sooner_than_lockstep": over_lockstep,
        "speedup_had_it_learned_as_lockstep": as_lockstep,
        "speedup_over_synchronous": {
            "geometric_mean": round(math.exp(statistics.mean(logs)), 3) if logs else None,
            "ci95": None if ci is None else [round(math.exp(v), 3) for v in ci["ci95"]],
            "n": len(logs), "method_missed": [s for s, (a, b) in times.items()
                                              if math.isinf(b) and math.isfinite(a)],
            "baseline_missed": [s for s, (a, _) in times.items() if math.isinf(a)],
            "per_seed": {s: round(a / b, 3) for s, (a, b) in times.items()
                         if math.isfinite(a) and math.isfinite(b)}},
        "staleness_mean": round(statistics.mean(x["staleness_mean"] for x in stale), 3),
        "staleness_90": statistics.mean(x["staleness_quantiles"]["90"] for x in stale),
        "staleness_max": max(x["staleness_max"] for x in stale),
        "client_steps": [round(statistics.mean(x["client_steps"][c] for x in stale))
                         for c in range(first["clients"])]})
  return rows


PRESET_SETTING = "β 0.9, η/(1−β) 0.25, n_sync 4"  # configs/asgd8.py's cell of the momentum sweep.

# What each `speeds_control` arm changes from lock-step, the candidate reason it tests.
CONTROL_CANDIDATES = {
    "heavy_tailed σ 0.1": "step times drawn, spread little (σ 0.1): the data order and irregular "
                          "pushes of a drawn run, staleness near lock-step's",
    "heavy_tailed σ 0.3": "step times drawn, spread moderately (σ 0.3)",
    "spread": "each client at its own fixed speed (0.5–1.5): unequal contributions, regular pushes",
    "lock-step, random phases": "lock-step's evenly spread phases alone (each client's phase "
                                "drawn instead)",
    "lock-step, heavy_tailed's data order": "a heavy-tailed run's data order alone (the images "
                                            "each client skips), its pushes lock-step's",
}


def control_share(sooner: dict | None, left: dict | None) -> str:
  """How much of the heavy-tailed runs' gain over lock-step an arm reproduces, from its speed-up
  over lock-step (`sooner`) and its time over the heavy-tailed runs' (`left`), both seed-paired
  95% intervals (`_log_ratio`): "all of it" (sooner's interval above 1, left's not), "part of it"
  (both above 1), "none of it" (sooner's not above 1, left's above 1), "not separated" (neither
  above 1: five seeds cannot tell), "not testable" (fewer than MIN_PAIRS seeds on a side)."""
  if not (sooner and left and sooner["ci95"] and left["ci95"]):
    return "not testable"
  is_sooner, is_later = sooner["ci95"][0] > 1.0, left["ci95"][0] > 1.0
  if is_sooner:
    return "part of it" if is_later else "all of it"
  return "none of it" if is_later else "not separated"


def speeds_control(runs: list[dict], chosen: dict) -> dict | None:
  """Why `speeds`' heavy-tailed clients reach the target sooner than the same setting in
  lock-step (1.51× [1.10, 2.07] in mean client steps, seeds 0–4): the rule, fixed before the
  `speeds_control` runs.

  The gain: lock-step's time to the target over the heavy-tailed runs' (seed-paired, `_log_ratio`).
  Each arm of `speeds_control` (the same setting and seeds 0–4; CONTROL_CANDIDATES says what it
  changes) is read by two seed-paired intervals: its speed-up over lock-step (lock-step's time
  over its own) and its time over the heavy-tailed runs' (above 1: it is slower than they are),
  which `control_share` turns into how much of the gain it reproduces; its share of the gain's
  logarithm is given beside (log of its speed-up over lock-step / log of the gain). An arm that
  changes one thing from lock-step (its phases; its data order) and reproduces "all of it" or
  "part of it" names that thing as a cause, all or part; the σ arms and `spread` say where along
  the spread of step times the gain appears. Where neither one-thing arm reproduces any of it,
  the heavy-tailed speed-up over synchronous training is stated as synchronous training's wait
  times an unexplained factor (`unexplained`: True). Ten intervals, not adjusted for their
  number: an explanation, not a claim of either paper. Also given: each arm's final test top-1
  minus lock-step's (seed-paired). None before the runs it reads exist."""
  target = chosen.get("target_top1")
  lockstep = _sweep_cell(runs, PRESET_SETTING)
  heavy = {s: r for s, r in select(runs, part="speeds", label=f"{PRESET_SETTING}, heavy_tailed"
                                   ).items() if s in STUDY_SEEDS}
  arms_runs = [r for r in runs if r["part"] == "speeds_control" and r["seed"] in STUDY_SEEDS]
  if not (target and lockstep and heavy and arms_runs):
    return None
  times = lambda cell: {s: time_to(r, target) for s, r in cell.items()}
  ratio = lambda a, b: _log_ratio({s: (a[s], b[s]) for s in sorted(set(a) & set(b))})
  locked, drawn = times(lockstep), times(heavy)
  gain = ratio(locked, drawn)
  arms = []
  for label in dict.fromkeys(r["label"] for r in arms_runs):
    cell = select(arms_runs, label=label)
    arm = label.removeprefix(f"{PRESET_SETTING}, ")
    sooner, left = ratio(locked, times(cell)), ratio(times(cell), drawn)
    share = (math.log(sooner["geometric_mean"]) / math.log(gain["geometric_mean"])
             if sooner["geometric_mean"] and gain["geometric_mean"] not in (None, 1.0) else None)
    stale = [r["staleness"] for r in cell.values() if "staleness" in r]
    arms.append({"arm": arm, "label": label, "changes": CONTROL_CANDIDATES.get(arm, ""),
                 "seeds": sorted(cell), "top1": round(mean_final(cell), 4),
                 "minus_lockstep": paired(cell, lockstep, lambda r: r["final_eval_top1"]),
                 "sooner_than_lockstep": sooner, "time_over_heavy_tailed": left,
                 "share_of_gain": None if share is None else round(share, 3),
                 "reproduces": control_share(sooner, left),
                 "staleness_mean": round(statistics.mean(x["staleness_mean"] for x in stale), 3)
                 if stale else None})
  single = [a for a in arms if a["arm"].startswith("lock-step")]
  return {"gain": gain, "arms": arms,
          "unexplained": not any(a["reproduces"] in ("all of it", "part of it") for a in single)}


def _log_ratio(pairs: dict) -> dict:
  """A speed-up (as `speedup` reports one) from seed → (baseline's time, method's time): the
  geometric mean of their ratio over the seeds where both are finite, its 95% interval (Student's
  t on the log ratios), and the seeds on which either never reached the target."""
  logs = [math.log(a / b) for a, b in pairs.values() if math.isfinite(a) and math.isfinite(b)]
  ci = interval(logs)
  return {"geometric_mean": round(math.exp(statistics.mean(logs)), 3) if logs else None,
          "ci95": None if ci is None else [round(math.exp(v), 3) for v in ci["ci95"]],
          "n": len(logs),
          "method_missed": [s for s, (a, b) in pairs.items() if math.isinf(b) and math.isfinite(a)],
          "baseline_missed": [s for s, (a, _) in pairs.items() if math.isinf(a)]}


def boundary(runs: list[dict]) -> list[dict]:
  """Where A-SGD was measured not to learn, partly or wholly: every lock-step A-SGD setting of
  COLLAPSE_PARTS (seeds 0–9) on which at least one seed ended below COLLAPSE_TOP1, keyed by the
  server's rule, momentum, clients, n_sync and the server's effective step (each client's
  η/(1 − β), times the clients when summed), with how many of its seeds collapsed; an entry at
  least as far out as another of the same rule and momentum that collapsed on as large a share
  of its seeds is left out (the nearer one already warns). Sorted: hybrid_parallel/local_sgd/
  asgd.py's MEASURED_BOUNDARY."""
  cold = [r for r in runs if r["part"] in COLLAPSE_PARTS and r["scheme"] == "asgd" and
          r.get("step_times", "equal") == "equal" and r["seed"] < 10]
  cells = {}
  for r in cold:
    key = (r["server_rule"], r["momentum"], r["clients"], r["n_sync"], server_effective_step(r))
    cells.setdefault(key, {})[r["seed"]] = r["final_eval_top1"] < COLLAPSE_TOP1
  found = [{"server_rule": k[0], "momentum": k[1], "clients": k[2], "n_sync": k[3],
            "effective_step": k[4], "collapsed": sum(v.values()), "seeds": len(v)}
           for k, v in cells.items() if any(v.values())]
  share = lambda c: c["collapsed"] / c["seeds"]
  nearest = [c for c in found if not any(
      other is not c and _at_least_as_far_out(c, other) and share(other) >= share(c)
      and (other != c) for other in found)]
  return sorted(nearest, key=lambda c: (c["server_rule"], c["momentum"], c["effective_step"],
                                        c["n_sync"], c["clients"]))

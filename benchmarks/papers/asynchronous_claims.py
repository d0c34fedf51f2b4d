"""The verdict table of docs/asynchronous.md: one line per claim — the papers' (from
asynchronous_findings.findings) and this study's own (from the results the study derives from its
runs) — and Holm's adjustment over every claim a test decides.

Each line is an asynchronous_findings.claim: the claim, whose it is, whether its rule was fixed
before the data it reads, its key numbers, its verdict, the p of its test and a caveat. This
study's own claims read `holds` or `does_not_hold`; the papers' `reproduced` or `not_reproduced`;
either may be `inconclusive` or `not_testable`. A claim that needs several tests to pass takes the
largest of their p (the intersection-union test); a claim decided by collapses or by targets
never reached takes Fisher's exact test of those counts. Holm's step-down adjustment then holds
the family-wise error of all the tested claims at 5%: a line that passes its own test but not
Holm's is `exploratory`.
"""

from benchmarks.papers import asynchronous_findings as rules

STUDY = "this study"
PASSING = ("reproduced", "holds")
# How much of the heavy-tailed runs' gain a one-thing arm of the control reproduces
# (asynchronous_findings.control_share), as the verdict on that thing as its cause.
CONTROL_VERDICTS = {"all of it": "holds", "part of it": "holds", "none of it": "does_not_hold",
                    "not separated": "inconclusive", "not testable": "not_testable"}


def times_of(speedup: dict) -> str:
  """A speed-up read as a multiple of the baseline's time: "1.81× [1.69, 1.94]" for ×0.55."""
  low, high = speedup["ci95"]
  return f"{1 / speedup['geometric_mean']:.2f}× [{1 / high:.2f}, {1 / low:.2f}]"


def _preset_claims(result: dict) -> list[dict]:
  """configs/asgd8.py against synchronous training on equal GPUs."""
  v, where = result.get("preset_validation"), result.get("where_asgd_is_faster")
  if not v:
    return []
  speedup, accuracy = v["speedup_over_synchronous"], v["top1_minus_synchronous"]
  target = 100 * result["chosen"]["target_top1"]
  seeds = f"seeds {min(v['seeds'])}–{max(v['seeds'])}"
  first = v.get("first_version")
  found = [
      rules.claim(
          "asgd8_slower", f"asgd8 reaches {target:.1f}% later than synchronous training on equal "
          f"GPUs", STUDY,
          verdict=rules.VERDICTS["study"][rules.below(speedup, 1.0)], fixed_before=True,
          test=f"on {seeds}, which did not choose the setting, seed-paired: synchronous "
               f"training's time to {target:.1f}% over asgd8's, each step priced on one 8-GPU "
               f"H100 node by the time model; holds if the speed-up's 95% interval lies below 1",
          key=[["time to the target, × synchronous training's", times_of(speedup)]],
          p=rules.toward(speedup, -1),
          caveat="digits' steps priced on a modelled H100 node; depends on the schedule's decay" + (
              f"; the first version (n_sync {first['n_sync']}): "
              f"{times_of(first['speedup_over_synchronous'])}" if first else ""),
          evidence={"speedup_over_synchronous": speedup}),
      rules.claim(
          "asgd8_less_accurate", "asgd8 ends less accurate than synchronous training", STUDY,
          verdict=rules.VERDICTS["study"][rules.below(accuracy)], fixed_before=True,
          test=f"on {seeds}, final test top-1 of asgd8 minus synchronous training's, "
               f"seed-paired; holds if the 95% interval lies below 0",
          key=[["final test top-1 − synchronous, points", rules.points(accuracy)]],
          p=rules.toward(accuracy, -1),
          caveat="about 5 of 360 test images",
          evidence={"top1_minus_synchronous": accuracy})]
  if where:
    found.append(rules.claim(
        "asgd8_slower_everywhere", "asgd8 is slower than synchronous training on every machine "
        "the time model prices", STUDY,
        verdict=rules.VERDICTS["study"][all(rules.below(r["speedup"], 1.0) for r in where)],
        fixed_before=False, decided_after="the machines were chosen after the one-node result",
        test="seeds 0–4 (which chose the setting: favourable to A-SGD), each side's measured "
             "steps to the target priced by the time model on one H100 node, on 8 one-GPU "
             "nodes over 400 Gb/s to 1 Gb/s, and on Blue Waters; holds if on every machine the "
             "speed-up's interval lies below 1",
        key=[[f"speed-up over synchronous training on {len(where)} machines",
              f"×{min(r['speedup']['geometric_mean'] for r in where):.2f}–"
              f"×{max(r['speedup']['geometric_mean'] for r in where):.2f}, every upper bound ≤ "
              f"{max(r['speedup']['ci95'][1] for r in where):.2f}"]],
        p=rules.p_all(rules.toward(r["speedup"], -1) for r in where),
        caveat="one server behind one link; a sharded server not modelled",
        evidence={r["machine"]: r["speedup"] for r in where}))
  return found


def _summing_claim(result: dict) -> list[dict]:
  grid = result.get("summing")
  if not (grid and grid["rows"]):
    return []
  rows = grid["rows"]
  both = [r for r in rows if r["averaged_reached_target"] is not None]
  best = next(r for r in rows if r["learning_rate"] == grid["chosen_rate"])
  target = 100 * result["chosen"]["target_top1"]
  holds = (all(r["reached_target"] == 0 for r in rows) and
           all(r["averaged_reached_target"] == r["seeds"] for r in both))
  clean = [r for r in both if r["collapsed"] == 0 and r["summed_minus_averaged"]]
  return [rules.claim(
      "summing_no_rate", "a summing server trains at no rate tried; averaging does", STUDY,
      verdict=rules.VERDICTS["study"][holds], fixed_before=False,
      decided_after="the grid was extended below 1/8 of the one-client rate after its best lay "
                    "at that edge; the claim was read from the grid",
      test=f"8 clients at n_sync 4, 450 steps, summed at 1/32–1/2 of the one-client rate (server "
           f"steps η/(1−β) 0.03125–0.5): holds if no summed seed at any rate reaches "
           f"{target:.1f}% and, at every server step the momentum sweep also averaged, every "
           f"averaged seed does (Fisher's exact test of the counts at each)",
      key=[["best sum", f"{100 * best['top1']:.1f}%, {best['reached_target']} of "
                         f"{best['seeds']} seeds reach the target"],
           ["seeds reaching it, summed / averaged, at server steps " +
            ", ".join(f"{r['server_effective_step']:g}" for r in both),
            ", ".join(f"{r['reached_target']} / {r['averaged_reached_target']}" for r in both) +
            " (Fisher exact p " + ", ".join(f"{r['reached_fisher_p']:.2g}" for r in both) + ")"]],
      p=rules.p_all(r["reached_fisher_p"] for r in both),
      caveat="450 steps; on 1,080 the chosen rate ends below the target",
      evidence={"rows": rows})]


def _staleness_claims(result: dict) -> list[dict]:
  effect, rows = result.get("staleness_effect"), result.get("momentum_effect") or []
  found = []
  if effect:
    chain = effect["chain"]
    found.append(rules.claim(
        "staleness_accuracy", "staleness costs accuracy at each n_sync's best step", STUDY,
        verdict=rules.VERDICTS["study"][all(rules.above(c["loss"]) for c in chain)],
        fixed_before=False,
        decided_after="the chain's test was written after the sweep's runs",
        test="8 averaged clients, 450 steps: each n_sync's best effective step η/(1−β) of 0.125–1 "
             "by mean final test top-1; holds if from n_sync 1 to 4, 4 to 16 and 16 to 32 each "
             "seed-paired loss has its interval above 0",
        key=[["top-1 at n_sync " + " / ".join(str(b["n_sync"]) for b in effect["best"]),
              " / ".join(f"{100 * b['top1']:.1f}" for b in effect["best"]) + "%"],
             ["each step's loss, points", [rules.points(c["loss"]) for c in chain]]],
        p=rules.p_all(rules.toward(c["loss"], +1) for c in chain),
        caveat="the best step chosen on the seeds it is scored on",
        evidence=effect))
    found.append(rules.claim(
        "staleness_step", "staleness limits the effective step", STUDY,
        verdict=rules.VERDICTS["study"][effect["reached_at_0.5_fisher_p_4_vs_32"] < 0.05 and
                                effect["collapsed_at_1_fisher_p_4_vs_32"] < 0.05],
        fixed_before=False, decided_after="the counts and their tests were chosen after the "
                                          "sweep's runs",
        test="momentum 0.9: the seeds reaching the target at η/(1−β) 0.5, and those ending below "
             "20% at 1 (seeds 0–9 where run), n_sync 4 against 32, Fisher's exact test; holds "
             "if both p lie below 0.05",
        key=[["at η/(1−β) 0.5, seeds reaching the target at n_sync 1 / 4 / 16 / 32",
              " / ".join(v.replace(" of ", "/") for v in effect["reached_at_0.5"].values()) +
              f" (4 vs 32: Fisher exact p {effect['reached_at_0.5_fisher_p_4_vs_32']:.2g})"],
             ["at 1, seeds below 20%",
              " / ".join(v.replace(" of ", "/") for v in effect["collapsed_at_1"].values()) +
              f" (p {effect['collapsed_at_1_fisher_p_4_vs_32']:.2g})"]],
        p=max(effect["reached_at_0.5_fisher_p_4_vs_32"],
              effect["collapsed_at_1_fisher_p_4_vs_32"]),
        caveat="n_sync 1 collapses more than 4 at the largest step (sign test p "
               f"{(result.get('largest_step') or {}).get('sign_test_p')})",
        evidence={k: v for k, v in effect.items() if k not in ("best", "chain")}))
  if rows:
    worse = [r for r in rows if not r["bound"] and (
        rules.below(r["difference"]) or (r["collapse_fisher_p"] or 1) < 0.05 and
        r["collapsed_momentum_0.9"] > r["collapsed_momentum_0"])]
    better = [r for r in rows if not r["bound"] and rules.above(r["difference"])]
    found.append(rules.claim(
        "momentum_not_cause", "at equal η/(1−β), momentum 0.9 is never measurably worse than 0",
        STUDY,
        verdict=rules.VERDICTS["study"][not worse], fixed_before=False,
        decided_after="read after the sweep's runs (its design, equal effective steps, was "
                      "fixed before)",
        test="the momentum sweep: momentum 0 and 0.9 at equal η/(1−β) of 0.125–1 and n_sync 1, "
             "4, 16 and 32, seed-paired final test top-1 (Fisher's exact test of the collapsed "
             "seeds where a side collapsed; not testable where both sit at chance); holds if no "
             "cell shows 0.9 worse",
        key=[["cells where 0.9 is measurably better / worse", f"{len(better)} / {len(worse)} of "
                                                              f"{len(rows)}"]],
        caveat="no difference is not equivalence",
        evidence={"worse": [(r["n_sync"], r["effective_step"]) for r in worse],
                  "better": [(r["n_sync"], r["effective_step"]) for r in better]}))
  return found


def _speeds_claims(result: dict) -> list[dict]:
  found = []
  target = 100 * result["chosen"].get("target_top1", 0)
  for row in result.get("step_times") or []:
    name = {"heavy_tailed": "heavy-tailed step times", "straggler": "one straggler"}[
        row["step_times"]]
    speedup = row["speedup_over_synchronous"]
    found.append(rules.claim(
        f"speeds_{row['step_times']}", f"with {name}, asgd8 beats synchronous training that "
        f"waits for its slowest device", STUDY,
        verdict=rules.VERDICTS["study"][rules.faster(speedup)], fixed_before=False,
        decided_after="the rule was written with the runs",
        test="seeds 0–4, time in mean client steps (the meetings' cost left out on both sides); "
             "synchronous training waits at each step for its slowest device; holds if the "
             "speed-up's interval lies above 1",
        key=[["speed-up", speedup], ["its wait", row["speedup_had_it_learned_as_lockstep"]],
             ["sooner than lock-step", row["sooner_than_lockstep"]]],
        p=rules.toward(speedup, +1),
        caveat="meetings' cost left out; backup workers not modelled",
        evidence={k: row[k] for k in ("speedup_over_synchronous", "minus_lockstep",
                                      "minus_synchronous", "sooner_than_lockstep",
                                      "speedup_had_it_learned_as_lockstep")}))
  control = result.get("speeds_control")
  for arm in (control or {}).get("arms", []):
    if not arm["arm"].startswith("lock-step"):
      continue  # the σ and spread arms place the gain; they test no one cause.
    cause = ("a heavy-tailed run's data order" if "data order" in arm["arm"] else
             "lock-step's evenly spread phases")
    found.append(rules.claim(
        f"control_{'data_order' if 'data order' in arm['arm'] else 'phases'}",
        f"the heavy-tailed runs' gain over lock-step comes from {cause}", STUDY,
        verdict=CONTROL_VERDICTS[arm["reproduces"]], fixed_before=True,
        test=f"asynchronous_findings.speeds_control (committed before its runs): lock-step "
             f"clients with only this changed ({arm['changes']}); holds if its speed-up over "
             f"lock-step lies above 1 (all or part of the gain), does not hold if it does not "
             f"while its time over the heavy-tailed runs' lies above 1, inconclusive otherwise",
        key=[["sooner than lock-step", arm["sooner_than_lockstep"]],
             ["time over the heavy-tailed runs'", arm["time_over_heavy_tailed"]]],
        caveat="ten control intervals, not adjusted",
        evidence={**arm, "the gain over lock-step": control["gain"]}))
  paine1 = result.get("step_times_paine1")
  if paine1:
    ratio = paine1["time_lockstep_over_heavy_tailed"]
    found.append(rules.claim(
        "speeds_paine1", "at Experiment 1's setting, heavy-tailed clients learn sooner than "
        "lock-step ones", STUDY, verdict=rules.VERDICTS["study"][rules.faster(ratio)],
        fixed_before=False, decided_after="the rule was written with the runs",
        test="8 clients averaged at n_sync 4 over 1,080 steps, seeds 0–4, each client's every "
             "step lognormal (σ 1, mean 1): lock-step's time to the target over theirs, in mean "
             "client steps, seed-paired; holds if its interval lies above 1",
        key=[["lock-step's time over theirs", ratio]],
        p=rules.toward(ratio, +1),
        caveat="the preset's draws: not independent; Paine's nodes were alike",
        evidence=paine1))
  return found


def study_claims(result: dict) -> list[dict]:
  """This study's own claims, in the order of the page's findings."""
  return (_preset_claims(result) + _summing_claim(result) + _staleness_claims(result) +
          _speeds_claims(result))


def verdicts(result: dict) -> list[dict]:
  """Every claim of the study: its own (`study_claims`), then the papers' (`result["findings"]`),
  each with its Holm-adjusted p (`holm_p`, over every claim with a p) and `after_holm`: its
  verdict, or `exploratory` where it passes its own test but not Holm's."""
  lines = study_claims(result) + result["findings"]
  adjusted = rules.holm({line["id"]: line["p"] for line in lines if line["p"] is not None})
  return [{**line, "holm_p": adjusted.get(line["id"]),
           "after_holm": ("exploratory" if line["verdict"] in PASSING and
                          line["id"] in adjusted and adjusted[line["id"]] >= 0.05
                          else line["verdict"])}
          for line in lines]


# --- The verdict table as text (its Markdown table: papers/tables.py) -------------------------


def key_value(value) -> str:
  """A line's key number: text as it is, several joined by " / ", a speed-up to 2 decimals, or
  an interval (to 1 decimal where it spans a unit, else 3)."""
  if isinstance(value, str):
    return value
  if isinstance(value, list):
    return " / ".join(map(key_value, value))
  if value is None or not value.get("ci95"):
    return "—"
  low, high = value["ci95"]
  if "geometric_mean" in value:
    return f"×{value['geometric_mean']:.2f} [{low:.2f}, {high:.2f}]"
  digits = 1 if max(abs(low), abs(high)) >= 1 else 3
  return f"{value['mean']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def keys_text(line) -> str:
  return "; ".join(f"{label}: {key_value(value)}" for label, value in line["key"])


def verdict_text(line, *, bold: bool = True) -> str:
  """The verdict, and for a claim that passes its own test Holm's adjusted p: exploratory where
  it does not pass Holm's."""
  verdict = line["verdict"].replace("_", " ")
  text = f"**{verdict}**" if bold else verdict
  if line["holm_p"] is None or line["verdict"] not in PASSING:
    return text
  if line["after_holm"] == "exploratory":
    return f"{text}; exploratory after Holm (p {line['holm_p']:.2g})"
  return f"{text} (Holm p {line['holm_p']:.2g})"


def numbered(lines: list[dict]) -> list[dict]:
  return [{**line, "number": i} for i, line in enumerate(lines, 1)]


def verdict_lines(result: dict) -> str:
  """The verdict table as plain lines, one a claim (the `--recompute` mode prints them)."""
  return "\n".join(
      f"{line['number']:>2}. {verdict_text(line, bold=False)}: {line['claim']} "
      f"[{line['source']}; rule fixed before the data: {'yes' if line['fixed_before'] else 'no'}]"
      f" {keys_text(line)}" for line in numbered(result.get("verdicts") or []))

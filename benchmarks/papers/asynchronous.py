r"""The asynchronous half of the papers on digits: Paine et al.'s GPU A-SGD and Su, Chen & Morgan's
model averaging — what each found, in accuracy and in time.

  python -m benchmarks.papers.asynchronous [--parts=cause,paine,su] [--seeds=0,1,2] [--out=docs]

Every run trains `alexnet_tiny` on digits at 64² in this process (train.train_config), 16 images
per client (replica) per step, test top-1 every 45 steps (half a client's epoch) and the
training error (1 − training accuracy, Paine's curves) every 11. A client's epoch is
1,437 / 16 ≈ 90 of its steps, so n_sync = 1, 2, 4, 8 is 1.1, 2.2, 4.5, 8.9% of an epoch: Paine's
n_sync of 100–900 at 10,009 steps per ImageNet epoch is 1–9%, the same range. Each setting runs
on each of --seeds (as large_batch's and owt_variants': the seed changes the initialisation, the
data order and dropout).

  cause   Why A-SGD at n_sync = 4 collapses on digits (4 clients, 16 epochs): from the collapsing
          setting (staggered, momentum 0.9, each client at the synchronous rate ÷ 4, so that the
          server's summed update equals synchronous SGD's at n_sync = 1) one thing changed at a
          time — no stagger, momentum 0.5 or 0, a quarter of the rate, a warm start, n_sync 2 —
          beside synchronous data parallelism at momentum 0.9 and 0.
  paine   His three experiments, each client at the single client's rate (as his clients ran
          cuda-convnet's), momentum as `cause` finds stable: (1) 8 clients against 1 at n_sync
          ≈ 6% of an epoch; (2) a cold start with 1, 2, 4, 8 clients for the same time; (3) a warm
          start (one client for 5% of the run) with n_sync 1–9% of an epoch × 1, 2, 4, 8
          clients.
  su      Su et al.'s four ways to average — allreduce, ring, butterfly, hopping ring — every 1,
          4 and 16 steps, on 4 and 8 replicas.

Every run's row also carries `predicted_step_s`: the time model's seconds per step of the same
scheme for the papers' ImageNet AlexNet (128 images per client) on the papers' hardware (Paine's
K20X nodes of Blue Waters for A-SGD and its synchronous reference; Krizhevsky's 8-K20 machine
for averaging) and on one 8-GPU H100 node (analysis/costmodel.py) — the time axis of the curves.
Writes asynchronous.json ({"runs": [...], "findings": [...], "machines": {...}}) and
asynchronous.png to --out, after every part; a run whose setting and seed are already there is
kept, not trained again, whether or not --seeds names its seed (a stopped study resumes; more
seeds add to those there; a part's new settings train alone).
docs/asynchronous.md renders its tables. About 15–40 s a run on a 2-core CPU (4–8 clients).
"""

import dataclasses
import json
import os
import statistics
import tempfile

from absl import app, flags, logging

import benchmarks
import train
from benchmarks.papers import tables
from benchmarks.speed import gpu_topologies
from configs import default
from hybrid_parallel import models, partitioning, platforms
from hybrid_parallel.analysis import costmodel, hardware

PARTS = ("cause", "paine", "su")
_PARTS = benchmarks.define_choices("parts", PARTS, "Which parts (module docstring).")
_SEEDS = benchmarks.define_seeds_flag()
_OUT = flags.DEFINE_string("out", benchmarks.DOCS, "Output directory.")

TRAIN_IMAGES = 1437  # digits' training split.
PER_CLIENT = 16
# One client's rate at 16 images: the test suite's 0.05 for alexnet_tiny at batch 64
# (tests/train_test.py), linearly scaled. Synchronous SGD on D clients takes D times it (the
# linear rule), as does each replica of model averaging (their mean update is then synchronous
# SGD's); each A-SGD client takes it as it is, and the server sums the clients' updates (what
# Paine's unmodified cuda-convnet clients did).
RATE_16 = 0.0125


@dataclasses.dataclass(frozen=True)
class Setting:
  """One run's settings."""
  part: str
  label: str
  parallelism: str
  clients: int
  learning_rate: float  # what each client's (replica's) optimiser applies.
  momentum: float = 0.9
  n_sync: int | None = None  # A-SGD: n_push = n_fetch.
  stagger: bool = True
  warm_start_fraction: float = 0.0
  sync_every: int | None = None  # averaging.
  average_method: str | None = None
  steps: int = 352  # each client's (replica's) steps: 16 epochs of 4 × 16 images.

  @property
  def staleness_fraction_of_epoch(self) -> float | None:
    """Images a client trains on between its meetings, as a share of the training set."""
    every = self.n_sync or self.sync_every
    return round(every * PER_CLIENT / TRAIN_IMAGES, 4) if every else None


def cause_settings() -> list[Setting]:
  base = Setting("cause", "A-SGD n_sync 4", "asgd", 4, RATE_16, n_sync=4)
  return [
      Setting("cause", "data (synchronous)", "data", 4, 4 * RATE_16),
      # The same optimiser as A-SGD at momentum 0: what staleness costs apart from momentum.
      Setting("cause", "data (synchronous), momentum 0", "data", 4, 4 * RATE_16, momentum=0.0),
      base,
      dataclasses.replace(base, label="… without stagger", stagger=False),
      dataclasses.replace(base, label="… momentum 0.5", momentum=0.5),
      dataclasses.replace(base, label="… momentum 0", momentum=0.0),
      dataclasses.replace(base, label="… a quarter of the rate", learning_rate=RATE_16 / 4),
      dataclasses.replace(base, label="… warm start 10%", warm_start_fraction=0.1),
      dataclasses.replace(base, label="… n_sync 2", n_sync=2),
  ]


def paine_settings(momentum: float) -> list[Setting]:
  """His experiments, each client at one client's rate (RATE_16), every run the same number of
  client steps (the same time, as his 24-hour runs: the model puts the meetings' cost under
  0.2% of a step): 360, four epochs of one client."""
  asgd = lambda part, label, clients, n_sync, warm=0.0: Setting(
      part, label, "asgd" if clients > 1 else "single", clients, RATE_16,
      momentum=momentum, n_sync=n_sync if clients > 1 else None, warm_start_fraction=warm,
      steps=360)
  # Experiments 1 and 2: a cold start, n_sync 5 (5.6% of a client's epoch; his 600: 6%); and
  # synchronous SGD on 8 clients for the same epochs.
  rows = [asgd("paine 1+2", f"{c} client{'s' * (c > 1)}, cold start", c, 5) for c in (1, 2, 4, 8)]
  rows.append(Setting("paine 1+2", "data 8×1 (synchronous)", "data", 8, 8 * RATE_16,
                      momentum=momentum, steps=360))
  # Experiment 3: a warm start (one client for 5% of the run; his 12 h of a 10.7-day run: 4.7%).
  rows += [asgd("paine 3", f"{c} client{'s' * (c > 1)}, n_sync {n}, warm start", c, n, warm=0.05)
           for n in (1, 4, 8) for c in (1, 2, 4, 8) if c > 1 or n == 1]
  return rows


def su_settings() -> list[Setting]:
  return [Setting("su", f"{method}, every {every}, {replicas} replicas", "averaging", replicas,
                  replicas * RATE_16, sync_every=every, average_method=method)
          for replicas in (4, 8) for method in ("allreduce", "ring", "butterfly", "hopping_ring")
          for every in (1, 4, 16)]


def config_of(setting: Setting, seed: int):
  """The run's config: `configs.default` with the setting's fields."""
  clients = setting.clients
  config = default.for_scheme(setting.parallelism, clients, 1,
                              global_batch_size=PER_CLIENT * clients)
  steps_per_epoch = TRAIN_IMAGES // (PER_CLIENT * clients)
  total = setting.steps
  # Evaluated every half epoch of one client (45 steps), whatever the clients: one time axis.
  every = TRAIN_IMAGES // PER_CLIENT // 2
  # The reference batch is the run's own: the config's rate is applied as it is.
  config.update(model="alexnet_tiny", image_size=64, seed=seed, momentum=setting.momentum,
                base_learning_rate=setting.learning_rate, reference_batch_size=PER_CLIENT * clients,
                num_train_steps=total, lr_decay_epochs=(0.6 * total / steps_per_epoch,),
                eval_every_steps=every, log_every_steps=max(1, every // 4),
                checkpoint_every_steps=0, eval_batch_size=120)
  if setting.parallelism == "asgd":
    config.update(n_push=setting.n_sync, n_fetch=setting.n_sync, asgd_stagger=setting.stagger,
                  warm_start_steps=round(setting.warm_start_fraction * total))
  if setting.parallelism == "averaging":
    config.update(sync_every=setting.sync_every, average_method=setting.average_method)
  return config


def train_run(setting: Setting, seed: int) -> dict:
  config = config_of(setting, seed)
  with tempfile.TemporaryDirectory() as workdir:
    train.train_config(config, workdir)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      rows = [json.loads(line) for line in f]
  return {"steps": config.num_train_steps,
          "eval_top1": [[r["step"], round(r["eval_top1"], 4)] for r in rows if "eval_top1" in r],
          "train_error": [[r["step"], round(1 - r["train_accuracy"], 4)] for r in rows
                          if "train_accuracy" in r]}


def imagenet_step_s(machine, *, scheme: str, data: int, model: int = 1, every=None,
                    exchange: str | None = None) -> float:
  """Seconds per step of `scheme` on a data × model mesh (A-SGD's clients, averaging's replicas
  on `data`) for the papers' ImageNet AlexNet at 128 images per device, on `machine`
  (analysis/costmodel.py); `every` and `exchange` are a local scheme's meetings."""
  arch = models.ARCHITECTURES["alexnet"]
  if scheme in ("asgd", "averaging"):
    return costmodel.local_sgd_step_time(arch, machine, replicas=data, batch_per_replica=128,
                                         image_size=224, num_classes=1000, every=every,
                                         exchange=exchange)["step_s"]
  return costmodel.step_time(arch, partitioning.make_plan(scheme, data, model), machine,
                             global_batch=128 * data * model, image_size=224,
                             num_classes=1000)["step_s"]


def predicted_step_s(setting: Setting, machines) -> dict:
  """Seconds per step of the setting at the papers' size on the papers' hardware and on one
  8-GPU H100 node."""
  exchange = "parameter_server" if setting.parallelism == "asgd" else setting.average_method
  return {where: round(imagenet_step_s(machine, scheme=setting.parallelism, data=setting.clients,
                                       every=setting.n_sync or setting.sync_every,
                                       exchange=exchange), 4)
          for where, machine in machines.items()}


def machines() -> dict:
  """The papers' machines and an H100 node, each calibrated on its one-GPU time."""
  arch = models.ARCHITECTURES["alexnet"]
  flops = costmodel.training_flops_per_image(arch, 224, 1000) * 128
  steps = 90 * 1_281_167 / 128  # Krizhevsky et al. 2012's 90 epochs at batch 128.
  paine = hardware.paper_machines()["paine2013"].calibrated(
      flops_per_step=flops, seconds_per_step=10.7 * 86400 / steps, dtype="float32",
      source="Paine et al.: one K20X, about 10.7 days (taken as 90 epochs at batch 128)")
  k20s = hardware.paper_machines()["krizhevsky2014"].calibrated(
      flops_per_step=costmodel.training_flops_per_image(models.ARCHITECTURES["alexnet_owt"], 224,
                                                        1000) * 128,
      seconds_per_step=98.05 * 3600 / steps, dtype="float32",
      source="Krizhevsky 2014: one K20, 98.05 h for 90 epochs at batch 128")
  # The H200's measured bare step of alexnet, float32, batch 128 (docs/gpu.json).
  measured = next(r for r in gpu_topologies.one_gpu_rows()
                  if (r["model"], r["dtype"], r["batch"]) == ("alexnet", "float32", 128))
  h100 = hardware.gpu_node("h100").calibrated(
      flops_per_step=flops, seconds_per_step=measured["step_ms"] / 1e3, dtype="float32",
      source="the H200's bare alexnet step, float32, batch 128 (docs/gpu.json)")
  return {"paine": dataclasses.replace(paine, nodes=9), "krizhevsky": k20s, "h100": h100}


def hardware_for(setting: Setting, all_machines: dict) -> dict:
  paper = "krizhevsky" if setting.parallelism == "averaging" else "paine"
  return {"paper_hardware": all_machines[paper], "h100_node": all_machines["h100"]}


def run_part(settings: list[Setting], *, seeds: list[int], all_machines: dict,
             done: list[dict]) -> list[dict]:
  """Every setting's runs on `seeds` and on every seed `done` (an earlier run's rows of this
  part) has for it, in the order of the seeds: a seed already in `done` kept as it is, the
  others trained. A setting no longer made (its part's settings changed) is dropped."""
  rows = []
  for setting in settings:
    prediction = predicted_step_s(setting, hardware_for(setting, all_machines))
    fields = dataclasses.asdict(setting)
    earlier = {r["seed"]: r for r in done if {k: r[k] for k in fields} == fields}
    for seed in sorted(set(seeds) | set(earlier)):
      if seed in earlier:
        rows.append({**earlier[seed], "predicted_step_s": prediction})
        continue
      row = {**dataclasses.asdict(setting), "scheme": setting.parallelism, "seed": seed,
             "staleness_fraction_of_epoch": setting.staleness_fraction_of_epoch,
             **train_run(setting, seed), "predicted_step_s": prediction}
      row["final_eval_top1"] = row["eval_top1"][-1][1]
      rows.append(row)
      print(json.dumps({k: row[k] for k in ("part", "label", "seed", "final_eval_top1")}),
            flush=True)
  return rows


def main(argv):
  del argv
  platforms.start(cpu_devices=8)
  logging.set_verbosity(logging.WARNING)
  path = os.path.join(_OUT.value, "asynchronous.json")
  result = benchmarks.load_if_present(path, default={}) or {"runs": []}
  all_machines = machines()
  result["machines"] = {name: {"name": m.name, "efficiency": round(m.efficiency, 4),
                               "calibrated_from": m.calibrated_from}
                        for name, m in all_machines.items()}
  for part in _PARTS.value:
    if part == "cause":
      settings = cause_settings()
    elif part == "paine":
      settings = paine_settings(momentum=stable_momentum(result["runs"]))
    else:
      settings = su_settings()
    others = [r for r in result["runs"] if not r["part"].startswith(part)]
    result["runs"] = others + run_part(
        settings, seeds=[int(s) for s in _SEEDS.value], all_machines=all_machines,
        done=[r for r in result["runs"] if r["part"].startswith(part)])
    # The parts in their order, whichever ran last: the JSON and its tables depend on the runs
    # alone, not on the order they were made in.
    result["runs"].sort(key=lambda r: PARTS.index(r["part"].split()[0]))
    result["findings"] = findings(result["runs"], all_machines)
    result["time"] = time_rows(result["runs"], all_machines)
    benchmarks.publish(result, path)  # after every part: a long run keeps what it finished.
  plot(result, os.path.join(_OUT.value, "asynchronous.png"))
  print(tables.asynchronous_findings(result))


# Accuracy against time: the test top-1 levels whose predicted time each scheme is priced at.
TARGETS = (0.4, 0.8)
# Synchronous schemes on 4 devices share one curve (they compute the same SGD: tests/step_test.py)
# and differ in time per step.
SYNCHRONOUS_4 = {"data 4×1": ("data", 4, 1), "model 1×4": ("model", 1, 4),
                 "hybrid 2×2": ("hybrid", 2, 2), "owt 2×2": ("owt", 2, 2)}


def time_rows(runs: list[dict], all_machines: dict) -> list[dict]:
  """Every 4-device scheme's curve on digits priced as ImageNet AlexNet steps (128 images per
  device) on one machine of the papers' (Krizhevsky 2014's 8 K20s, used for every row so that
  the rows compare) and on one 8-GPU H100 node: seconds to each of TARGETS, per seed."""
  where = {"papers_hardware": all_machines["krizhevsky"], "h100_node": all_machines["h100"]}
  priced = []  # (scheme, run label, its runs, {machine: seconds per step})
  synchronous = _runs(runs, "data (synchronous)")
  for name, (scheme, data, model) in SYNCHRONOUS_4.items():
    priced.append((name, "data (synchronous)", synchronous, {
        k: imagenet_step_s(m, scheme=scheme, data=data, model=model) for k, m in where.items()}))
  local = [r for r in runs if r["clients"] == 4 and r["scheme"] in ("averaging", "asgd")]
  for label in dict.fromkeys(r["label"] for r in local):
    first = _runs(local, label)[0]
    priced.append((f"{first['scheme']} 4×1", label, _runs(local, label), {
        k: imagenet_step_s(m, scheme=first["scheme"], data=4,
                           every=first["sync_every"] or first["n_sync"],
                           exchange=first["average_method"] or "parameter_server")
        for k, m in where.items()}))
  rows = []
  for scheme, label, chosen, step_s in priced:
    steps = {str(t): [_steps_to(r, t) for r in chosen] for t in TARGETS}
    rows.append({"scheme": scheme, "run": label, "seeds": len(chosen),
                 "step_s": {k: round(v, 5) for k, v in step_s.items()},
                 "best_top1": round(_mean([max(v for _, v in r["eval_top1"]) for r in chosen]), 4),
                 "steps_to": {t: [None if v == float("inf") else v for v in got]
                              for t, got in steps.items()},
                 "seconds_to": {t: None if float("inf") in got else
                                {k: round(_mean(got) * v, 2) for k, v in step_s.items()}
                                for t, got in steps.items()}})
  return rows


def stable_momentum(runs: list[dict]) -> float:
  """The largest momentum of `cause` at which A-SGD n_sync 4 ends within 5 points of synchronous
  SGD on every seed (0.9 is the papers'); 0 if none does."""
  def finals(label):
    return [r["final_eval_top1"] for r in runs if r["part"] == "cause" and r["label"] == label]
  reference = statistics.mean(finals("data (synchronous)") or [0.0])
  for label, momentum in (("A-SGD n_sync 4", 0.9), ("… momentum 0.5", 0.5),
                          ("… momentum 0", 0.0)):
    values = finals(label)
    if values and min(values) >= reference - 0.05:
      return momentum
  return 0.0


def _runs(runs, label):
  return [r for r in runs if r["label"] == label]


def _mean(values):
  return statistics.mean(values) if values else float("nan")


def _final(runs, label, key="final_eval_top1"):
  return [r[key] for r in _runs(runs, label)]


def _steps_to(run, top1: float) -> float:
  """The first step at which the run's test top-1 reaches `top1` (inf if never)."""
  return next((step for step, value in run["eval_top1"] if value >= top1), float("inf"))


def _jaggedness(run) -> float:
  """Mean absolute second difference of the training-error curve: how much it zigzags."""
  e = [v for _, v in run["train_error"]]
  return statistics.mean(abs(e[i + 1] - 2 * e[i] + e[i - 1]) for i in range(1, len(e) - 1))


def _verdict(holds: bool | None) -> str:
  return {True: "reproduced", False: "not_reproduced", None: "not_testable"}[holds]


def findings(runs: list[dict], all_machines) -> list[dict]:
  """Each of the papers' claims against the runs here: reproduced, not reproduced, or not
  testable, with the numbers that decide it (every rule stated in its `test`)."""
  found = []

  def add(claim, source, holds, test, evidence):
    found.append({"claim": claim, "source": source, "verdict": _verdict(holds), "test": test,
                  "evidence": evidence})

  if _runs(runs, "1 client, cold start") and _runs(runs, "8 clients, cold start"):
    one, eight = _runs(runs, "1 client, cold start"), _runs(runs, "8 clients, cold start")
    target = _mean([r["final_eval_top1"] for r in one])
    # A 1-client seed that never reaches the target counts its whole run: a lower bound on its
    # steps, so the speed-up is one too.
    t1 = [min(_steps_to(r, target), r["steps"]) for r in one]
    t8 = [_steps_to(r, target) for r in eight]
    add("8 clients at n_sync ≈ 6% of an epoch reach the single GPU's accuracy sooner (about 3.2× "
        "in wall-clock)", "Paine et al., Experiment 1 (Fig. 1)",
        max(t8) < _mean(t1),
        "every 8-client seed reaches one client's mean final test top-1 in fewer client steps "
        "than one client takes on average (the speed-up, in client steps, beside it)",
        {"target_top1": round(target, 4), "steps_1_client": t1, "steps_8_clients": t8,
         "speedup": round(_mean(t1) / _mean(t8), 2) if max(t8) < float("inf") else None})
    early = {c: [statistics.mean(e for _, e in r["train_error"][:len(r["train_error"]) // 4])
                 for r in _runs(runs, f"{c} client{'s' * (c > 1)}, cold start")]
             for c in (1, 2, 4, 8)}
    late = {c: [tables.late_error(r) for r in _runs(runs, f"{c} client{'s' * (c > 1)}, cold start")]
            for c in (1, 2, 4, 8)}
    slower_first = min(early[8]) > max(early[1])
    faster_later = max(late[8]) < min(late[1])
    add("with a cold start more clients learn slower at first and faster later",
        "Paine et al., Experiment 2 (Fig. 2)", slower_first and faster_later,
        "8 clients' training error over the first quarter above 1 client's on every seed, and "
        "over the last tenth below it on every seed",
        {"early_error": {c: round(_mean(v), 4) for c, v in early.items()},
         "late_error": {c: round(_mean(v), 4) for c, v in late.items()}})
  warm = lambda c, n: _runs(runs, f"{c} client{'s' * (c > 1)}, n_sync {n}, warm start")
  if warm(8, 4):
    errors = {n: {c: [tables.late_error(r) for r in warm(c if c > 1 else 1, n if c > 1 else 1)]
                  for c in (1, 2, 4, 8)} for n in (1, 4, 8)}
    more_is_better = all(max(errors[n][8]) < min(errors[n][1]) for n in errors)
    add("with a warm start more clients reach a lower training error at every n_sync",
        "Paine et al., Experiment 3 (Fig. 3)", more_is_better,
        "for each n_sync, 8 clients' late training error below 1 client's on every seed",
        {f"n_sync {n}": {c: round(_mean(v), 4) for c, v in by.items()}
         for n, by in errors.items()})
    jagged = {n: [_jaggedness(r) for r in warm(8, n)] for n in (1, 4, 8)}
    add("larger n_sync gives jagged training curves (stale updates)",
        "Paine et al., Experiment 3 (Fig. 3, 4)", min(jagged[8]) > max(jagged[1]),
        "8 clients' training-error curve zigzags more at n_sync 8 than at 1 on every seed (mean "
        "absolute second difference)", {f"n_sync {n}": round(_mean(v), 5)
                                         for n, v in jagged.items()})
    per_day = {n: 86400 / imagenet_step_s(all_machines["paine"], scheme="asgd", data=8, every=n,
                                          exchange="parameter_server") for n in (100, 900)}
    lower = max(errors[1][8]) < min(errors[8][8])
    add("n_sync 100 processes fewer minibatches in 24 h than 900, yet ends at a lower error",
        "Paine et al., Experiment 3 (Fig. 4)", lower and per_day[100] < per_day[900],
        "8 clients' late training error lower at n_sync 1 (1% of an epoch) than at 8 (9%) on "
        "every seed, and the time model's steps per day on Blue Waters fewer at n_sync 100",
        {"late_error_n_sync_1": round(_mean(errors[1][8]), 4),
         "late_error_n_sync_8": round(_mean(errors[8][8]), 4),
         "predicted_steps_per_day": {n: round(v) for n, v in per_day.items()}})
    sync8 = _final(runs, "data 8×1 (synchronous)")
    asgd8 = _final(runs, "8 clients, n_sync 4, warm start")
    add("A-SGD with 8 clients inside Paine's staleness, warm-started, learns about as well as "
        "synchronous SGD", "Paine et al., Experiments 1 and 3",
        _mean(asgd8) >= _mean(sync8) - 0.05,
        "8 clients at n_sync 4 (4.5% of an epoch) with a 5% warm start end within 5 points of "
        "test top-1 of synchronous SGD on 8 × 16 images at the same epochs (means of seeds)",
        {"asgd_top1": [round(v, 4) for v in asgd8], "synchronous_top1": [round(v, 4)
                                                                         for v in sync8]})
  if _runs(runs, "allreduce, every 1, 4 replicas"):
    sped = {}
    for method in ("allreduce", "ring", "butterfly", "hopping_ring"):
      for replicas in (4, 8):
        label = lambda every: f"{method}, every {every}, {replicas} replicas"
        target = 0.9 * _mean(_final(runs, label(1)))
        hours = {every: _mean([_steps_to(r, target) * r["predicted_step_s"]["paper_hardware"]
                               for r in _runs(runs, label(every))]) / 3600
                 for every in (1, 4, 16)}
        sped[f"{method}, {replicas}"] = {e: round(h, 4) for e, h in hours.items()}
    faster = all(min(h[4], h[16]) < h[1] for h in sped.values())
    add("averaging every few minibatches, by all-reduce, butterfly, ring or hopping ring, "
        "speeds training up (over averaging every minibatch: what averaging less often is for)",
        "Su, Chen & Morgan (a draft: the methods and the claim, no results)", faster,
        "for every method and replica count, averaging every 4 or 16 steps reaches 90% of the "
        "every-step run's final test top-1 in fewer predicted hours on 8 K20s than averaging "
        "every step", {"predicted_hours_to_target": sped})
  client_step = imagenet_step_s(all_machines["paine"], scheme="asgd", data=8, every=600,
                                exchange="parameter_server")
  days = 22 * 10_009 * client_step / 86400
  add("8 clients at n_sync 600 reach epoch 22 in 3.3 days (one K20X: 10.7 days), read as 22 "
      "epochs of each client's own steps", "Paine et al., Experiment 1",
      abs(days / 3.3 - 1) <= 0.2,
      "the time model's days for 22 × 10,009 steps of one client among 8 on Blue Waters within "
      "20% of 3.3 (the accuracy half is ImageNet's, not testable here)",
      {"predicted_days": round(days, 2), "paper_days": 3.3,
       "predicted_client_step_s": round(client_step, 4),
       "client_step_s_the_paper_implies": round(3.3 * 86400 / (22 * 10_009), 4)})
  return found


def plot(result: dict, path: str) -> None:
  """Test top-1 against predicted seconds of every 4-device scheme (time_rows), one panel per
  machine."""
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  figure, axes = plt.subplots(1, 2, figsize=(14, 5))
  for ax, (where, title) in zip(axes, (("papers_hardware", "Krizhevsky 2014's 8 K20s"),
                                       ("h100_node", "one 8-GPU H100 node"))):
    for row in result["time"]:
      chosen = _runs(result["runs"], row["run"])
      steps = [s for s, _ in chosen[0]["eval_top1"]]
      means = [statistics.mean(r["eval_top1"][i][1] for r in chosen) for i in range(len(steps))]
      style = {"data": "-", "model": "-", "hybrid": "-", "owt": "-", "averaging": "--"}
      ax.plot([s * row["step_s"][where] for s in steps], means, style.get(
          row["scheme"].split()[0], ":"), label=f"{row['scheme']}: {row['run']}", linewidth=1)
    ax.set(title=title, xlabel="predicted seconds (digits' steps priced as ImageNet AlexNet's)",
           ylabel="test top-1 on digits (mean of seeds)")
  axes[1].legend(fontsize=5, loc="lower right")
  figure.tight_layout()
  figure.savefig(path, dpi=100)


if __name__ == "__main__":
  app.run(main)

r"""The asynchronous half of the papers on digits: Paine et al.'s GPU A-SGD and Su, Chen & Morgan's
model averaging — what each found, tested with runs whose settings separate what the findings
depend on (momentum from step size, staleness from the server's rule), on enough seeds to put a
confidence interval on every comparison.

  python -m benchmarks.papers.asynchronous [--parts=reference,...] [--seeds=0,1,2,3,4]
                                           [--out=DIR | --publish]
  python -m benchmarks.papers.asynchronous --recompute=docs/asynchronous.json

Every run trains `alexnet_tiny` on digits at 64² in this process (train.train_config), 16 images
per client (replica) per step, dropout 0.25 (the 64-unit FC layers of the tiny net lose too much
at the papers' 0.5: tests/train_test.py). A client's epoch is 1,437 / 16 ≈ 90 of its steps, and
the momentum horizon 1/(1 − β) is 10 steps at β = 0.9: Paine's n_sync of 100–900 (1–9% of an
ImageNet epoch of 10,009 steps) lies 10–90 horizons out; here n_sync 4 is 4.5% of an epoch (his
share) and 0.4 horizons, n_sync 32 is 36% of an epoch and 3.2 horizons — no single n_sync is both,
so the parts run both. The parts, in order (each later part reads the rates the earlier chose):

  reference    One client, momentum 0.9 (the papers'), at rates 0.003125–0.025 for 12 epochs
               (1,080 steps, the rate × 0.1 after 60%), evaluated every 9 steps: its plateau. The
               rate with the best mean final test top-1 is "the one-client rate", and its runs are
               `paine1`'s one-GPU baseline. The same client is also run for 540 steps (× 0.1
               after 324), `su`'s schedule, as its baseline. A target is 95% of the baseline's
               mean final test top-1.
  synchronous  Data parallelism on 8 × 16 images at rates 0.025–0.2, momentum 0.9, 450 steps
               (40 epochs of the global batch): the tuned synchronous baseline.
  momentum     8 clients, the server averaging, staggered, 450 steps: momentum 0 and 0.9 at equal
               effective step η/(1 − β) ∈ {0.125, 0.25, 0.5, 1}, n_sync ∈ {1, 4, 16, 32} (n_sync 1
               is synchronous data parallelism exactly).
  staleness    The sweep's largest step (momentum 0.9, η/(1−β) 1) at n_sync 1 and 4 on seeds 5–9:
               whether n_sync 4 collapses less often than synchronous SGD's update, on ten seeds.
  summing      8 clients summed at n_sync 4 on the sweep's schedule, at 1/32–1/2 of the
               one-client rate in factors of 2 (server steps η/(1−β) of 0.03125–0.5): a summing
               server at a rate chosen for it, by the best mean final accuracy as every other
               rate (the grid reached below 1/8 after the best of the first three lay at 1/8);
               then Experiment 1 (as `paine1`: 1,080 steps, n_sync 4 and 32) summed at the rate
               it chose.
  paine1       His Experiment 1: 8 clients at the one-client rate and momentum (his clients ran
               the single-GPU settings), the server summing (his) or averaging, n_sync 4 and 32,
               on the reference's schedule (1,080 client steps), evaluated every 9 steps.
  paine2       His Experiment 2, a cold start: 1, 2, 4, 8, 16 and 32 clients, both server rules,
               n_sync 4 and 32, 360 steps at a constant rate; the server's loss on 128 fixed
               training images after every step (`probe_examples`).
  paine3       His Experiment 3, a warm start for half the run (Paine: 12 h, then 24 h): one
               client for 360 steps, then 1, 2, 4 or 8 clients for 360 more at n_sync 1, 4, 16, 32,
               the server summing; at 8 clients also with every client's momentum started from
               zero rather than client 0's, and with the server averaging at n_sync 4 and 32;
               probed every step.
  speeds       configs/asgd8.py's setting with clients at their own speeds (heavy-tailed and
               one-straggler step times, hybrid_parallel/local_sgd/asgd.py), each run for as
               long in time (mean client steps) as in lock-step.
  speeds_paine1  Experiment 1 averaged at n_sync 4 with heavy-tailed step times.
  speeds_control  Why `speeds`' heavy-tailed clients reach the target sooner than lock-step ones
               (the rule: asynchronous_findings.speeds_control, fixed before these runs): the
               preset's setting with heavy-tailed step times of σ 0.1 and 0.3, with `spread`
               step times, in lock-step with random phases, and in lock-step fed the images
               a heavy-tailed run would have fed each client (asgd_data_order).
  su           Su et al.'s averaging: allreduce, butterfly and hopping ring every 1, 4 and 16
               steps on 4 and 8 replicas, 540 steps (the one client of `reference` on the same
               schedule is the one-GPU baseline). Each (replicas, every) takes the rate among
               1, 2, 4, 8 × the one-client rate at which allreduce averaging ends best; the other
               methods take the same rate. Ring averaging computes allreduce's mean (tests/
               averaging_test.py) and differs only in time: it is priced, not trained again.
  validate     configs/asgd8.py and the tuned synchronous baseline on seeds 5–9, which did not
               choose its setting: the config's accuracy and time on seeds its rule did not read.
  overlap      What the time model charges for a meeting, against what the compiled program
               runs beside it: averaging (butterfly, allreduce, every step) and A-SGD (n_sync 4)
               on 4 of an H100 node's GPUs at the papers' size (ImageNet AlexNet, 64 images a
               replica, bfloat16), compiled without a GPU (needs JAX's CUDA plugin: Python
               ≥ 3.12 with requirements-test.txt), each meeting's collectives with the compute
               XLA schedules while they are in flight (hlo_stats.async_collectives). Trains
               nothing.

Every run's row carries `predicted_step_s`: the time model's seconds per step of its scheme for
the papers' ImageNet AlexNet (128 images per client) on each paper's hardware — Paine's K20X
nodes of Blue Waters (`blue_waters`, where Paine's comparisons are priced) and Krizhevsky 2014's
8 K20s (`k20s`, where Su's are) — and on one 8-GPU H100 node (analysis/costmodel.py); every
A-SGD row carries `staleness`, what its clients saw (replayed from its seed by asgd.timeline), and
a row whose clients kept their own speeds its evaluations' times (`eval_time`). Writes
asynchronous.json — the runs, the `overlap` rows, and what `derive` makes of the runs ("machines",
"step_prices", "chosen", "findings", "momentum_effect", "staleness_effect", "boundary",
"preset_validation", "where_asgd_is_faster", "largest_step", "summing", "step_times",
"step_times_paine1", "speeds_control", "verdicts") — and asynchronous.png under
runs/asynchronous/ (or --out; with --publish into docs/) after every run, each run's progress
lines (compile, step, loss, ETA) streaming as it trains; a run whose setting and seed are already
there is kept, not trained again, and re-priced (a stopped study resumes; more seeds add to those
there). Findings (asynchronous_findings.py, asynchronous_claims.py) follow rules written before
the runs, except where docs/asynchronous_appendix.md says otherwise. `--recompute=FILE` trains
nothing and writes nothing: it derives every key from FILE's runs, prints the verdict table and
exits 1 where a key differs from FILE's. About 3.5 hours on a 2-core CPU for five seeds of the
first parts; the later parts' runs take 2–17 minutes each on a loaded 2-core machine.
"""

import dataclasses
import functools
import json
import os
import statistics
import sys
import tempfile

import jax
from absl import app, flags

import benchmarks
import train
from benchmarks.common import compile_only
from benchmarks.papers import asynchronous_claims as claims
from benchmarks.papers import asynchronous_findings as rules
from benchmarks.papers import tables
from benchmarks.speed import gpu_topologies
from configs import default
from hybrid_parallel import faults, models, partitioning, platforms
from hybrid_parallel.analysis import costmodel, hardware, hlo_stats
from hybrid_parallel.local_sgd import asgd

PARTS = ("reference", "synchronous", "momentum", "staleness", "summing", "paine1", "paine2",
         "paine3", "speeds", "speeds_paine1", "speeds_control", "su", "validate", "overlap")
_PARTS = benchmarks.define_choices("parts", PARTS, "Which parts (module docstring), in order.")
_SEEDS = benchmarks.define_seeds_flag(default=range(5))
_OUTPUT = benchmarks.define_output_flags("asynchronous")
_RECOMPUTE = flags.DEFINE_string(
    "recompute", None, "A results file of this study (docs/asynchronous.json): recompute every "
    "finding, choice and verdict from the runs it stores, without training, print the verdict "
    "table and exit 1 if any differs from the file's own; writes nothing.")

TRAIN_IMAGES = 1437  # digits' training split.
PER_CLIENT = 16
PROBE_EXAMPLES = 128  # a multiple of every client count (the probe batch is split over them).
VALIDATION_SEEDS = (5, 6, 7, 8, 9)  # `validate`: seeds no choice was made on.

REFERENCE_RATES = (0.003125, 0.00625, 0.0125, 0.025)
SYNCHRONOUS_RATES = (0.025, 0.05, 0.1, 0.2)  # 8 × 16 images; the linear rule's 8 × 0.0125 = 0.1.
EFFECTIVE_STEPS = (0.125, 0.25, 0.5, 1.0)  # η / (1 − β); one client's tuned 0.0125 / 0.1 = 0.125.
N_SYNCS = (1, 4, 16, 32)
SU_RATE_FACTORS = (1, 2, 4, 8)  # × the one-client rate, up to the replicas.


@dataclasses.dataclass(frozen=True)
class Setting:
  """One run's settings (a seed apart)."""
  part: str
  label: str
  scheme: str  # single, data, asgd or averaging.
  clients: int  # A-SGD's clients, averaging's replicas, data parallelism's devices.
  learning_rate: float  # what each client's optimiser applies (data: to the global batch's mean).
  steps: int  # each client's steps.
  momentum: float = 0.9
  decay_at: int | None = None  # the step after which the rate is × 0.1; None: constant.
  eval_every: int = 45
  probe: bool = False
  n_sync: int | None = None  # A-SGD: n_push = n_fetch.
  server_rule: str | None = None
  warm_start_steps: int = 0
  warm_start_momentum: bool = True
  sync_every: int | None = None  # averaging.
  average_method: str | None = None
  step_times: str = "equal"  # A-SGD: asgd_step_times (equal: lock-step).
  heavy_tail_sigma: float = 1.0  # A-SGD: asgd_heavy_tail_sigma.
  phases: str = "even"  # A-SGD: asgd_phases.
  data_order: str = "own"  # A-SGD: asgd_data_order.

  @property
  def effective_step(self) -> float:
    return round(self.learning_rate / (1 - self.momentum), 6)


# Setting's fields added after runs were stored: a stored run without one has its default, and
# a run stores one only where it is not the default (the runs before it stay as they were).
LATER_FIELDS = ("heavy_tail_sigma", "phases", "data_order")


def stored_fields(setting: Setting) -> dict:
  """The setting's fields as its runs store them (LATER_FIELDS only where not the default)."""
  defaults = {f.name: f.default for f in dataclasses.fields(Setting)}
  return {k: v for k, v in dataclasses.asdict(setting).items()
          if k not in LATER_FIELDS or v != defaults[k]}


def _rate(value: float) -> float:
  return round(value, 8)  # 0.25 × (1 − 0.9) is 0.024999…: the setting's rate as written.


def _clients(c: int) -> str:
  return f"{c} client{'s' * (c > 1)}"


def reference_settings() -> list[Setting]:
  return [Setting("reference", f"one client, rate {r}", "single", 1, r, 1080, decay_at=648,
                  eval_every=9) for r in REFERENCE_RATES]


def reference_schedule_settings(rate: float) -> list[Setting]:
  """The one client on `su`'s schedule."""
  return [Setting("reference", "one client, 540 steps", "single", 1, rate, 540, decay_at=324,
                  eval_every=9)]


def synchronous_settings() -> list[Setting]:
  return [Setting("synchronous", f"data 8×1, rate {r}", "data", 8, r, 450, decay_at=270)
          for r in SYNCHRONOUS_RATES]


def momentum_settings() -> list[Setting]:
  return [Setting("momentum", f"β {beta}, η/(1−β) {step}, n_sync {n}", "asgd", 8,
                  _rate(step * (1 - beta)), 450, momentum=beta, decay_at=270, n_sync=n,
                  server_rule="average")
          for n in N_SYNCS for step in EFFECTIVE_STEPS for beta in (0.0, 0.9)]


STALENESS_SEEDS = tuple(range(5, 10))  # `staleness`: five more seeds at one cell of the sweep.


def staleness_settings() -> list[Setting]:
  """The momentum sweep's largest step (momentum 0.9, η/(1−β) 1) at n_sync 1 (synchronous SGD's
  update) and 4 on STALENESS_SEEDS: whether n_sync 4 collapses less often than n_sync 1, on
  ten seeds (with the sweep's 0–4) rather than five."""
  return [Setting("staleness", f"β 0.9, η/(1−β) 1.0, n_sync {n}", "asgd", 8, 0.1, 450,
                  decay_at=270, n_sync=n, server_rule="average") for n in (4, 1)]


SPEEDS = ("heavy_tailed", "straggler")  # `speeds`: the non-lock-step distributions run.


def speeds_settings() -> list[Setting]:
  """configs/asgd8.py's setting (the momentum sweep's β 0.9, η/(1−β) 0.25, n_sync 4) with
  clients at their own speeds (asgd.py: step times drawn from the seed, pushes applied in
  arrival order), each run for as long in time (mean client steps) as in lock-step."""
  return [Setting("speeds", f"β 0.9, η/(1−β) 0.25, n_sync 4, {t}", "asgd", 8, 0.025, 450,
                  decay_at=270, n_sync=4, server_rule="average", step_times=t) for t in SPEEDS]


CONTROL_SIGMAS = (0.1, 0.3)  # `speeds_control`: heavy-tailed step times spread less than σ 1.


def speeds_control_settings() -> list[Setting]:
  """`speeds`' preset setting (β 0.9, η/(1−β) 0.25, n_sync 4, 8 clients averaged), each run as
  long in time as lock-step's 450 steps: heavy-tailed step times of σ in CONTROL_SIGMAS (σ 1 is
  `speeds`' own), `spread` step times (each client's fixed, uniform on 0.5–1.5), lock-step with
  each client's phase drawn from the seed, and lock-step fed, client by client, the images a
  heavy-tailed run of the same seed would have fed it (asgd.py's asgd_data_order)."""
  preset = "β 0.9, η/(1−β) 0.25, n_sync 4"
  setting = lambda label, **fields: Setting(
      "speeds_control", f"{preset}, {label}", "asgd", 8, 0.025, 450, decay_at=270, n_sync=4,
      server_rule="average", **fields)
  return ([setting(f"heavy_tailed σ {sigma}", step_times="heavy_tailed", heavy_tail_sigma=sigma)
           for sigma in CONTROL_SIGMAS] +
          [setting("spread", step_times="spread"),
           setting("lock-step, random phases", phases="random"),
           setting("lock-step, heavy_tailed's data order", data_order="heavy_tailed")])


def speeds_paine1_settings(rate: float) -> list[Setting]:
  """Experiment 1 averaged at n_sync 4 with heavy-tailed step times, as long in time."""
  return [Setting("speeds_paine1", "8 clients, average, n_sync 4, heavy_tailed", "asgd", 8, rate,
                  1080, decay_at=648, eval_every=9, n_sync=4, server_rule="average",
                  step_times="heavy_tailed")]


# × the one-client rate: the server's η/(1−β) of 0.03125–0.5. The first three were run first; the
# best of them lay at the grid's lower edge, so the grid went on down.
SUMMING_FACTORS = (0.03125, 0.0625, 0.125, 0.25, 0.5)


def summing_settings(rate: float) -> list[Setting]:
  """8 clients summed at n_sync 4 on the momentum sweep's schedule, at client rates that put the
  server's effective step 8η/(1−β) at 0.03125–0.5 in factors of 2 (the sweep's grid, 0.125–1,
  and below it; 1 is Experiment 1's collapse); the best mean final top-1 chooses, as every other
  rate is chosen."""
  return [Setting("summing", f"8 clients, sum, n_sync 4, rate {_rate(f * rate)}", "asgd", 8,
                  _rate(f * rate), rules.SUMMING_GRID_STEPS, decay_at=270, n_sync=4,
                  server_rule="sum")
          for f in SUMMING_FACTORS]


def summing_paine1_settings(rate: float) -> list[Setting]:
  """Experiment 1 (as `paine1`) with the server summing and each client at `rate`, the rate the
  summing part's grid chose for the sum."""
  return [Setting("summing", f"Experiment 1: 8 clients, sum, n_sync {n}, rate {rate}", "asgd", 8,
                  rate, 1080, decay_at=648, eval_every=9, n_sync=n, server_rule="sum")
          for n in (4, 32)]


def paine1_settings(rate: float) -> list[Setting]:
  return [Setting("paine1", f"8 clients, {rule}, n_sync {n}", "asgd", 8, rate, 1080,
                  decay_at=648, eval_every=9, n_sync=n, server_rule=rule)
          for rule in ("sum", "average") for n in (4, 32)]


def paine2_settings(rate: float) -> list[Setting]:
  one = [Setting("paine2", "1 client", "single", 1, rate, 360, probe=True)]
  return one + [Setting("paine2", f"{_clients(c)}, {rule}, n_sync {n}", "asgd", c, rate, 360,
                        probe=True, n_sync=n, server_rule=rule)
                for rule in ("sum", "average") for n in (4, 32) for c in (2, 4, 8, 16, 32)]


def paine3_settings(rate: float) -> list[Setting]:
  one = [Setting("paine3", "1 client", "single", 1, rate, 720, probe=True)]
  warm = lambda c, n, momentum=True, rule="sum": Setting(
      "paine3", f"{_clients(c)}, n_sync {n}" + ("" if momentum else ", momentum from zero") +
      (", average" if rule == "average" else ""),
      "asgd", c, rate, 720, probe=True, n_sync=n, server_rule=rule, warm_start_steps=360,
      warm_start_momentum=momentum)
  return (one + [warm(c, n) for n in N_SYNCS for c in (2, 4, 8)] +
          [warm(8, n, momentum=False) for n in N_SYNCS[1:]] +
          [warm(8, n, rule="average") for n in rules.PAINE3_AVERAGED])


def su_tuning_settings(rate: float) -> list[Setting]:
  """Allreduce averaging at each rate factor: what picks each (replicas, every)'s rate."""
  return [_su("allreduce", d, every, _rate(f * rate)) for d in (4, 8) for every in (1, 4, 16)
          for f in SU_RATE_FACTORS if f <= d]


def su_method_settings(rates: dict) -> list[Setting]:
  """Butterfly and hopping ring at the rate allreduce chose for their (replicas, every)."""
  return [_su(method, d, every, rates[f"{d}, {every}"]) for method in ("butterfly", "hopping_ring")
          for d in (4, 8) for every in (1, 4, 16)]


def _su(method: str, replicas: int, every: int, rate: float) -> Setting:
  return Setting("su", f"{method}, every {every}, {replicas} replicas, rate {rate}", "averaging",
                 replicas, rate, 540, decay_at=324, eval_every=9, sync_every=every,
                 average_method=method)


def asgd_settings(setting: Setting) -> asgd.Settings:
  return asgd.Settings(n_push=setting.n_sync, n_fetch=setting.n_sync, asgd_stagger=True,
                       warm_start_steps=setting.warm_start_steps,
                       asgd_warm_start_momentum=setting.warm_start_momentum,
                       asgd_server_rule=setting.server_rule, asgd_step_times=setting.step_times,
                       asgd_heavy_tail_sigma=setting.heavy_tail_sigma, asgd_phases=setting.phases,
                       asgd_data_order=setting.data_order)


def program_steps(setting: Setting, seed: int) -> int:
  """The run's program steps: its warm start and the rounds of its clients' events
  (asgd.rounds_for) that end by its `steps` in time — `steps` itself in lock-step."""
  if setting.scheme != "asgd" or setting.step_times == "equal":
    return setting.steps
  return setting.warm_start_steps + asgd.rounds_for(
      asgd_settings(setting), setting.clients, seed=seed,
      time=setting.steps - setting.warm_start_steps)


def config_of(setting: Setting, seed: int):
  """The run's config: `configs.default` with the setting's fields."""
  clients = setting.clients
  global_batch = PER_CLIENT * clients
  config = default.for_scheme(setting.scheme, clients, 1, global_batch_size=global_batch)
  steps_per_epoch = TRAIN_IMAGES // global_batch
  # The rate is each client's as it is (the reference batch is the run's own), decayed (or not)
  # at a client step.
  decay = ({"lr_decay": "step", "lr_decay_epochs": (setting.decay_at / steps_per_epoch,)}
           if setting.decay_at else {"lr_decay": "constant"})
  steps = program_steps(setting, seed)
  # As many evaluations in time as in lock-step.
  every = max(1, round(setting.eval_every * steps / setting.steps))
  config.update(model="alexnet_tiny", image_size=64, seed=seed, dropout_rate=0.25,
                momentum=setting.momentum, base_learning_rate=setting.learning_rate,
                reference_batch_size=global_batch, num_train_steps=steps,
                eval_every_steps=every, log_every_steps=every,
                checkpoint_every_steps=0, eval_batch_size=128,
                probe_examples=PROBE_EXAMPLES if setting.probe else 0, **decay)
  if setting.scheme == "asgd":
    config.update(n_push=setting.n_sync, n_fetch=setting.n_sync,
                  asgd_server_rule=setting.server_rule, warm_start_steps=setting.warm_start_steps,
                  asgd_warm_start_momentum=setting.warm_start_momentum,
                  asgd_step_times=setting.step_times,
                  asgd_heavy_tail_sigma=setting.heavy_tail_sigma, asgd_phases=setting.phases,
                  asgd_data_order=setting.data_order)
  if setting.scheme == "averaging":
    config.update(sync_every=setting.sync_every, average_method=setting.average_method)
  return config


CHANCE_TOP1 = 0.1  # digits' 10 classes, 36 test images each: what a model of NaNs scores.


def train_run(config) -> dict:
  """One run's curves: test top-1 at every evaluation, and the probe's loss and error a step. A
  run whose loss or gradients became NaN stops there (`diverged_at_step`) and is scored at
  chance: its model predicts one class."""
  diverged_at = None
  with tempfile.TemporaryDirectory() as workdir:
    try:
      train.train_config(config, workdir)
    except faults.NonFiniteStep as e:
      diverged_at = e.step
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      rows = [json.loads(line) for line in f]
  losses = [r["train_loss"] for r in rows if "train_loss" in r]
  run = {"eval_top1": [[r["step"], round(r["eval_top1"], 4)] for r in rows if "eval_top1" in r],
         "final_train_loss": round(losses[-1], 4) if losses else None,
         "diverged_at_step": diverged_at}
  run["final_eval_top1"] = (CHANCE_TOP1 if diverged_at is not None or not run["eval_top1"]
                            else run["eval_top1"][-1][1])
  probes = [r for r in rows if "probe_loss" in r]
  if probes:
    run["probe_loss"] = [round(r["probe_loss"], 4) for r in probes]
    run["probe_error"] = [round(1 - r["probe_top1"], 4) for r in probes]
  return run


# --- The papers' hardware, and each setting's predicted step on it -----------------------------


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
  plan = partitioning.make_plan(scheme, data, model)
  # The data axis crosses nodes where the machine's nodes hold fewer devices than it has.
  crossing = ("data",) if data * model > machine.devices_per_node else ()
  transfers = costmodel.analytic_transfers(arch, plan, global_batch=128 * data * model,
                                           image_size=224, num_classes=1000,
                                           crossing_axes=crossing)
  return costmodel.step_time(arch, plan, machine, global_batch=128 * data * model,
                             image_size=224, num_classes=1000, transfers=transfers)["step_s"]


def predicted_step_s(setting: Setting, all_machines: dict, *, digits: int | None = 4) -> dict:
  """Seconds per step of the setting at the papers' size on each paper's hardware — Paine's
  K20X nodes of Blue Waters (`blue_waters`), Krizhevsky 2014's 8 K20s (`k20s`: Su et al.'s
  averaging is priced there) — and on one 8-GPU H100 node (`h100_node`). A comparison prices both
  its sides on one machine: the same one-client run is 2.6× dearer a step on Blue Waters (Paine's
  code) than on a K20 (cuda-convnet2)."""
  exchange = "parameter_server" if setting.scheme == "asgd" else setting.average_method
  rounded = (lambda s: s) if digits is None else (lambda s: round(s, digits))
  return {where: rounded(imagenet_step_s(all_machines[name], scheme=setting.scheme,
                                         data=setting.clients,
                                         every=setting.n_sync or setting.sync_every,
                                         exchange=exchange))
          for where, name in PRICED_ON.items()}


# Where each run's steps are priced: predicted_step_s's keys and machines()'s names.
PRICED_ON = {"blue_waters": "paine", "k20s": "krizhevsky", "h100_node": "h100"}


def machines() -> dict:
  """The papers' machines and an H100 node, each calibrated on its one-GPU time."""
  arch = models.ARCHITECTURES["alexnet"]
  flops = costmodel.training_flops_per_image(arch, 224, 1000) * 128
  steps = 90 * 1_281_167 / 128  # Krizhevsky et al. 2012's 90 epochs at batch 128.
  paine = hardware.paper_machines()["paine2013"].calibrated(
      flops_per_step=flops, seconds_per_step=10.7 * 86400 / steps, dtype="float32",
      source="Paine et al.: one K20X, about 10.7 days (taken as 90 epochs at batch 128: the "
             "paper does not say how many)")
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


def setting_of(run: dict) -> Setting:
  return Setting(**{f.name: run.get(f.name, f.default) if f.name in LATER_FIELDS else run[f.name]
                    for f in dataclasses.fields(Setting)})


def repriced(runs: list[dict], all_machines: dict) -> list[dict]:
  """`runs`, each with the price its setting has under the time model now (a kept run's price
  follows the model's code, not the day the run was trained) and, for A-SGD, what its clients
  saw (`what_it_saw`, added to runs made before it was recorded)."""
  return [{**run, "predicted_step_s": predicted_step_s(setting_of(run), all_machines),
           **({} if "staleness" in run else what_it_saw(setting_of(run), run["seed"], run))}
          for run in runs]


# --- Running the parts ------------------------------------------------------------------------


def run_settings(settings: list[Setting], *, seeds, all_machines: dict, done: list[dict],
                 config=config_of, save=lambda rows: None) -> list[dict]:
  """Every setting's runs on `seeds` and on every seed `done` (an earlier run's rows of the same
  part) has for it, in seed order: a seed already in `done` kept as it is, the others trained.
  A setting no longer made is dropped. `save(rows so far)` after each run it trains."""
  rows = []
  for setting in settings:
    prediction = predicted_step_s(setting, all_machines)
    fields = stored_fields(setting)
    earlier = {r["seed"]: r for r in done if setting_of(r) == setting}
    for seed in sorted(set(seeds) | set(earlier)):
      if seed in earlier:  # priced anew when the study started (main).
        rows.append(earlier[seed])
        continue
      print(f"{setting.part} {setting.label}, seed {seed}: training …", file=sys.stderr,
            flush=True)  # its progress lines follow (train.train_config).
      row = {**fields, "seed": seed, "effective_step": setting.effective_step,
             **train_run(config(setting, seed)), "predicted_step_s": prediction}
      row.update(what_it_saw(setting, seed, row))
      rows.append(row)
      print(json.dumps({k: row[k] for k in ("part", "label", "seed", "final_eval_top1",
                                            "diverged_at_step")}), flush=True)
      save(rows)  # every run as it ends: a study stopped keeps what it finished.
  return rows


@functools.lru_cache(maxsize=None)
def _timeline(settings: asgd.Settings, clients: int, seed: int, rounds: int) -> dict:
  events = asgd.timeline(settings, clients, seed=seed, rounds=rounds)
  return {"summary": asgd.staleness_summary(events), "time": events["time"]}


def what_it_saw(setting: Setting, seed: int, row: dict) -> dict:
  """An A-SGD run's clients' events, replayed by asgd.timeline from its seed (the same rounds
  the run made): `staleness` (asgd.staleness_summary) and, where clients kept their own speeds,
  `eval_time` (each evaluation's time in mean client steps). Nothing for the other schemes."""
  if setting.scheme != "asgd":
    return {}
  rounds = program_steps(setting, seed) - setting.warm_start_steps
  # Equal step times at even phases draw nothing from the seed.
  drawn = setting.step_times != "equal" or setting.phases == "random"
  key = (asgd_settings(setting), setting.clients, seed if drawn else 0, rounds)
  saw = _timeline(*key)
  out = {"staleness": saw["summary"]}
  if setting.step_times != "equal":
    warm = setting.warm_start_steps
    out["eval_time"] = [round(float(step if step <= warm else warm + saw["time"][step - warm - 1]),
                              3) for step, _ in row["eval_top1"]]
  return out


def best_rate(runs: list[dict], *, seeds, **fields) -> float:
  """The rate among the runs matching `fields` with the highest mean final test top-1 over
  `seeds` (a tie: the smaller rate)."""
  rates = sorted({r["learning_rate"] for r in runs if all(r.get(k) == v
                                                          for k, v in fields.items())})
  if not rates:
    raise ValueError(f"no runs of {fields}: run the part that makes them first.")
  scored = {rate: rules.mean_final({s: r for s, r in rules.select(
      runs, learning_rate=rate, **fields).items() if s in seeds}) for rate in rates}
  return max(rates, key=lambda rate: (scored[rate], -rate))


def choices(runs: list[dict], prices=None) -> dict:
  """What the earlier parts chose for the later ones (each rule in the module docstring), from
  the runs on the study's seeds (0–4); configs/asgd8.py's setting (`asgd8`) where `prices`
  (asynchronous_findings.stored_prices) is given."""
  seeds = set(range(5))
  chosen = {}
  if rules.select(runs, part="reference"):
    rate = best_rate(runs, seeds=seeds, part="reference", steps=1080)
    plateau = {s: r for s, r in rules.select(runs, part="reference", steps=1080,
                                       learning_rate=rate).items() if s in seeds}
    chosen.update(one_client_rate=rate, reference_top1=round(rules.mean_final(plateau), 4),
                  target_top1=round(rules.TARGET_SHARE * rules.mean_final(plateau), 4))
    su_schedule = {s: r for s, r in rules.select(runs, part="reference", steps=540).items()
                   if s in seeds}
    if su_schedule:
      chosen["su_target_top1"] = round(rules.TARGET_SHARE * rules.mean_final(su_schedule), 4)
  if rules.select(runs, part="summing", steps=rules.SUMMING_GRID_STEPS):
    chosen["summing_rate"] = best_rate(runs, seeds=seeds, part="summing",
                                       steps=rules.SUMMING_GRID_STEPS)
  if rules.select(runs, part="synchronous"):
    chosen["synchronous_rate"] = best_rate(runs, seeds=seeds, part="synchronous")
    preset = rules.preset_choice(runs, chosen, prices) if prices else None
    if preset:
      chosen["asgd8"] = preset
  su = [r for r in runs if r["part"] == "su" and r["average_method"] == "allreduce"]
  if su:
    chosen["su_rates"] = {f"{d}, {every}": best_rate(su, seeds=seeds, clients=d, sync_every=every)
                          for d in (4, 8) for every in (1, 4, 16)
                          if rules.select(su, clients=d, sync_every=every)}
  return chosen


def part_settings(part: str, chosen: dict) -> list[Setting]:
  """The settings of `part`, given what the earlier parts chose."""
  if part == "reference":
    settings = reference_settings()
    return settings + (reference_schedule_settings(chosen["one_client_rate"])
                       if "one_client_rate" in chosen else [])
  if part == "synchronous":
    return synchronous_settings()
  if part == "momentum":
    return momentum_settings()
  if part == "staleness":
    return staleness_settings()
  if part == "speeds":
    return speeds_settings()
  if part == "speeds_control":
    return speeds_control_settings()
  rate = chosen["one_client_rate"]
  if part == "paine1":
    return paine1_settings(rate)
  if part == "summing":
    return summing_settings(rate) + (summing_paine1_settings(chosen["summing_rate"])
                                     if "summing_rate" in chosen else [])
  if part == "speeds_paine1":
    return speeds_paine1_settings(rate)
  if part == "paine2":
    return paine2_settings(rate)
  if part == "paine3":
    return paine3_settings(rate)
  if part == "su":
    return su_tuning_settings(rate) + (su_method_settings(chosen["su_rates"])
                                       if len(chosen.get("su_rates", {})) == 6 else [])
  raise ValueError(part)


# What each part reads of an earlier part's runs: (the choice, the part that makes it).
NEEDS = {"paine1": ("one_client_rate", "reference"), "paine2": ("one_client_rate", "reference"),
         "summing": ("one_client_rate", "reference"),
         "speeds_paine1": ("one_client_rate", "reference"),
         "paine3": ("one_client_rate", "reference"), "su": ("one_client_rate", "reference"),
         "validate": ("synchronous_rate", "synchronous")}


def missing_choice(parts: list[str], runs: list[dict]) -> str | None:
  """One sentence for the first of `parts` whose earlier part has no runs in `runs` and does not
  run before it in `parts`; None when every part can run."""
  chosen = choices(runs)
  for i, part in enumerate(parts):
    key, earlier = NEEDS.get(part, (None, None))
    if key and key not in chosen and earlier not in parts[:i]:
      return (f"--parts={part} needs the {earlier} part's runs (its {key.replace('_', ' ')}), "
              f"which are not in --out: run --parts={earlier} first, or before it in --parts.")
  return None


def validate_runs(runs: list[dict], *, all_machines: dict, done: list[dict], save) -> list[dict]:
  """configs/asgd8.py and data 8×1 at the synchronous part's rate, on VALIDATION_SEEDS."""
  from configs import asgd8  # the config this part validates (its docstring quotes the result).
  sync_rate = choices(runs)["synchronous_rate"]
  config = asgd8.get_config()
  steps = config.num_train_steps
  asgd = Setting("validate", "configs/asgd8.py", "asgd", 8, config.base_learning_rate, steps,
                 momentum=config.momentum, decay_at=round(config.lr_decay_epochs[0] * (
                     TRAIN_IMAGES // config.global_batch_size)), n_sync=config.n_push,
                 server_rule=config.asgd_server_rule)
  sync = Setting("validate", f"data 8×1, rate {sync_rate}", "data", 8, sync_rate, 450,
                 decay_at=270)
  # The config's first version (n_sync 16, chosen as the largest n_sync within 5 points of
  # synchronous training; its runs were made by that version of the file): kept beside it.
  first = dataclasses.replace(asgd, label=rules.FIRST_PRESET, n_sync=16)

  def configure(setting, seed):
    if setting is asgd:  # the config file itself, as `python main.py --config=…` runs it.
      run_config = asgd8.get_config()
      run_config.seed = seed
      return run_config
    return config_of(setting, seed)

  return run_settings([asgd, first, sync], seeds=VALIDATION_SEEDS, all_machines=all_machines,
                      done=done, config=configure, save=save)


OVERLAP_SCHEMES = (("averaging, butterfly, every step", dict(average_method="butterfly",
                                                            sync_every=1)),
                   ("averaging, allreduce, every step", dict(average_method="allreduce",
                                                             sync_every=1)),
                   ("A-SGD, n_sync 4", dict(parallelism="asgd", n_push=4, n_fetch=4)))


def overlap_rows() -> list[dict]:
  """Each local-SGD step of OVERLAP_SCHEMES compiled for 4 GPUs of an H100 node (the `overlap`
  part): its meetings' asynchronous collectives of 1 MB or more, with the compute in flight."""
  reason = gpu_topologies.unavailable_reason()
  if reason:
    sys.exit(f"error: --parts=overlap: {reason}.")
  devices = gpu_topologies.mesh_devices(gpu_topologies.topology_devices("h100", "1x1x8"), 4, 1)
  rows = []
  for name, overrides in OVERLAP_SCHEMES:
    config = compile_only.config("averaging4", "bfloat16", **overrides)
    _, compiled, _ = compile_only.compile_for(config, devices)
    meetings = [c for c in hlo_stats.async_collectives(compiled.as_text()) if c.bytes >= 1e6]
    rows.append({"scheme": name, "gpu": "h100", "devices": 4, "jax": jax.__version__,
                 "collectives": [{"kind": c.kind, "mb": round(c.bytes / 1e6, 1),
                                  "compute_ops_in_flight": c.compute_ops_in_flight,
                                  "convolutions_and_matmuls_in_flight": c.heavy_ops_in_flight}
                                 for c in meetings]})
    print(json.dumps(rows[-1]), flush=True)
  return rows


def main(argv):
  del argv
  if _RECOMPUTE.value:
    if not os.path.exists(_RECOMPUTE.value):
      sys.exit(f"error: --recompute={_RECOMPUTE.value}: no such file; give a results file of "
               f"this study, such as docs/asynchronous.json.")
    platforms.start(cpu_devices=1)
    sys.exit(recompute(_RECOMPUTE.value))
  if "overlap" in _PARTS.value:  # its compile-only GPUs, before JAX starts a backend.
    gpu_topologies.without_sharded_autotuning()
  platforms.start(cpu_devices=32)
  path = _OUTPUT.path("asynchronous.json")
  # What a run made is kept (the runs, the compile-only overlap rows); everything else is made
  # from the runs again, so a key an older version wrote does not linger.
  earlier = benchmarks.load_if_present(path, default={}) or {}
  result = {"runs": earlier.get("runs", []),
            **({"overlap": earlier["overlap"]} if "overlap" in earlier else {})}
  for run in result["runs"]:  # runs made before clients had speeds of their own: lock-step.
    run.setdefault("step_times", "equal")
  problem = missing_choice(_PARTS.value, result["runs"])
  if problem:  # before any work: nothing trained, nothing written.
    sys.exit(f"error: {problem}")
  all_machines = machines()
  result["runs"] = repriced(result["runs"], all_machines)
  seeds = [int(s) for s in _SEEDS.value]
  for part in _PARTS.value:
    done = [r for r in result["runs"] if r["part"] == part]
    others = [r for r in result["runs"] if r["part"] != part]

    def save(rows, done=done, others=others):
      """The part's runs so far, and its earlier runs of settings not reached yet: a long run
      stopped keeps what it finished."""
      reached = {r["label"] for r in rows}
      # The parts in their order, whichever ran last: the JSON depends on the runs alone.
      result["runs"] = sorted(others + rows + [r for r in done if r["label"] not in reached],
                              key=lambda r: PARTS.index(r["part"]))
      publish(result, all_machines, path)

    if part == "overlap":
      result["overlap"] = overlap_rows()
      publish(result, all_machines, path)
      continue
    if part == "staleness":  # its own seeds, whatever --seeds says.
      made = run_settings(staleness_settings(), seeds=STALENESS_SEEDS,
                          all_machines=all_machines, done=done, save=save)
    elif part == "validate":
      made = validate_runs(result["runs"], all_machines=all_machines, done=done, save=save)
    else:
      made = run_settings(part_settings(part, choices(result["runs"])), seeds=seeds,
                          all_machines=all_machines, done=done, save=save)
      if part in ("reference", "su", "summing"):  # their second half depends on their first.
        made = run_settings(part_settings(part, choices(others + made)), seeds=seeds,
                            all_machines=all_machines, done=made, save=save)
    # The settings no longer made are gone now, not only those not reached.
    result["runs"] = sorted(others + made, key=lambda r: PARTS.index(r["part"]))
    publish(result, all_machines, path)
  plot(result, _OUTPUT.path("asynchronous.png"))
  print(claims.verdict_lines(result))


def publish(result: dict, all_machines: dict, path: str) -> None:
  """The runs, what they chose, the findings and the study's own results, written to `path`."""
  result.update(derive(result["runs"], all_machines))
  benchmarks.publish(result, path)


def step_prices(runs: list[dict], all_machines: dict) -> dict:
  """The time model's seconds per step of every setting among `runs`, unrounded, on each machine
  of PRICED_ON: asynchronous_findings.price_key → {where: seconds}. Every comparison prices its
  sides from these (a run's own `predicted_step_s` is rounded for its table)."""
  prices = {}
  for run in runs:
    key = rules.price_key(run)
    if key not in prices:
      prices[key] = predicted_step_s(setting_of(run), all_machines, digits=None)
  return dict(sorted(prices.items()))


def derive(runs: list[dict], all_machines: dict) -> dict:
  """Everything the study decides from its runs, without training: the time model's prices,
  what the earlier parts chose, the papers' findings, the study's own results and the verdict
  table (asynchronous_claims.verdicts). `--recompute` compares these with a file's."""
  prices = step_prices(runs, all_machines)
  priced = rules.stored_prices(prices)
  chosen = choices(runs, priced)
  target = chosen.get("target_top1")
  derived = {
      "machines": {name: {"name": m.name, "efficiency": round(m.efficiency, 4),
                          "calibrated_from": m.calibrated_from}
                   for name, m in all_machines.items()},
      "step_prices": prices, "chosen": chosen,
      "findings": rules.findings(runs, chosen, time_model=time_model(all_machines), prices=priced),
      "momentum_effect": rules.momentum_effect(runs),
      "staleness_effect": rules.staleness_effect(runs, target),
      "boundary": rules.boundary(runs),
      "preset_validation": rules.preset_validation(runs, chosen, priced),
      "where_asgd_is_faster": where_asgd_is_faster(runs, chosen, all_machines),
      "largest_step": rules.largest_step(runs),
      "summing": rules.summing_grid(runs, target),
      "step_times": rules.step_times_effect(runs, chosen),
      "step_times_paine1": rules.step_times_paine1(runs, chosen, priced),
      "speeds_control": rules.speeds_control(runs, chosen)}
  derived["verdicts"] = claims.verdicts(derived)
  return derived


def recompute(path: str) -> int:
  """The `--recompute` mode: every key `derive` makes, recomputed from the runs stored in the
  results file at `path` (no training, nothing written), compared with the file's own; prints
  the verdict table, one line a claim, and which keys differ. Returns the exit status: 0 where
  every key is equal."""
  _, stored = benchmarks.load_results(path)
  derived = json.loads(json.dumps(derive(stored["runs"], machines())))  # as the file holds it.
  differ = [key for key, value in derived.items() if stored.get(key) != value]
  print(claims.verdict_lines(derived))
  print(f"{len(derived)} keys recomputed from the {len(stored['runs'])} runs stored in "
        f"{os.path.relpath(path, benchmarks.ROOT)}: " +
        (f"{', '.join(differ)} differ from the file's." if differ else
         "every one equal to the file's."))
  return 1 if differ else 0


# Machines on which A-SGD is priced against synchronous training: one 8-GPU node, and 8
# single-GPU nodes on networks from 400 Gb/s InfiniBand down to 1 Gb/s Ethernet (bytes/s per GPU).
NETWORKS = (("400 Gb/s", 50e9), ("100 Gb/s", 12.5e9), ("25 Gb/s", 3.125e9), ("10 Gb/s", 1.25e9),
            ("1 Gb/s", 0.125e9))


def where_asgd_is_faster(runs: list[dict], chosen: dict, all_machines: dict) -> list[dict] | None:
  """A-SGD against synchronous data parallelism at its tuned rate, each side's steps to the
  target measured (seeds 0–4) and its step priced by the time model for ImageNet AlexNet (128
  images a device) on one H100 node, on 8 one-GPU H100 nodes over each of NETWORKS, and on
  Paine's Blue Waters: the speed-up in time (above 1: A-SGD faster) of the preset
  (chosen["asgd8"]) and of the fastest stale setting of the momentum sweep on that machine."""
  preset, target = chosen.get("asgd8"), chosen.get("target_top1")
  if not preset:
    return None
  sweep = [r for r in runs if r["part"] == "momentum" and r["seed"] in rules.STUDY_SEEDS and
           r["n_sync"] >= 4]
  cells = {label: rules.select(sweep, label=label)
           for label in dict.fromkeys(r["label"] for r in sweep)}
  sync = {s: r for s, r in rules.select(runs, part="synchronous",
                                        learning_rate=chosen["synchronous_rate"]).items()
          if s in rules.STUDY_SEEDS}
  h100 = all_machines["h100"]
  machines = [("one node: 8 H100s on NVLink", h100)] + [
      (f"8 nodes of one H100, {name} each", dataclasses.replace(
          h100, devices_per_node=1, nodes=8, network=hardware.Link(
              f"{name} per GPU", alpha=0.0, beta=1 / rate, source="as described")))
      for name, rate in NETWORKS] + [("Blue Waters: 8 K20X nodes (Paine)", all_machines["paine"])]
  rows = []
  for name, machine in machines:
    sync_s = imagenet_step_s(machine, scheme="data", data=8)
    priced = {}
    for label, cell in cells.items():
      asgd_s = imagenet_step_s(machine, scheme="asgd", data=8,
                               every=next(iter(cell.values()))["n_sync"],
                               exchange="parameter_server")
      result = rules.speedup(sync, cell, target, baseline_step_s=sync_s, method_step_s=asgd_s)
      if not result["method_missed"] and result["geometric_mean"]:
        priced[label] = (asgd_s, result)
    best = max(priced, key=lambda label: priced[label][1]["geometric_mean"])
    rows.append({"machine": name, "synchronous_step_s": round(sync_s, 5),
                 "asgd_step_s": round(priced[preset["label"]][0], 5),
                 "speedup": priced[preset["label"]][1],
                 "asgd_faster": rules.faster(priced[preset["label"]][1]),
                 "fastest": best, "fastest_step_s": round(priced[best][0], 5),
                 "fastest_speedup": priced[best][1],
                 "fastest_faster": rules.faster(priced[best][1])})
  return rows


def time_model(all_machines: dict) -> dict:
  """The time model's figures the findings quote: Blue Waters' A-SGD steps per day at n_sync
  100 and 900 (8 clients), and the days to 22 epochs of each of 8 clients at n_sync 600."""
  client_step = lambda n: imagenet_step_s(all_machines["paine"], scheme="asgd", data=8, every=n,
                                          exchange="parameter_server")
  return {"steps_per_day": {n: round(86400 / client_step(n)) for n in (100, 900)},
          "client_step_s_n_sync_600": round(client_step(600), 4),
          "days_22_epochs_n_sync_600": round(22 * 10_009 * client_step(600) / 86400, 2)}


def plot_lines(result: dict) -> list[tuple[str, str, list[tuple[str, dict]]]]:
  """The figure's panels: (title, the runs' curve key, [(a line's label, the fields selecting its
  runs)]) — each line one setting's runs (tests/asynchronous_study_test.py)."""
  return [
      ("test top-1", "eval_top1", [
          ("one client", dict(part="reference", steps=1080,
                              learning_rate=result["chosen"].get("one_client_rate"))),
          *((f"8 clients, {rule}, n_sync {n}", dict(part="paine1", server_rule=rule, n_sync=n))
            for rule in ("sum", "average") for n in (4, 32))]),
      ("probe loss (cold start)", "probe_loss", [
          ("1 client", dict(part="paine2", clients=1)),
          *((f"{c} clients, {rule}, n_sync 4", dict(part="paine2", clients=c, server_rule=rule,
                                                     n_sync=4))
            for c in (8, 32) for rule in ("sum", "average"))]),
      ("probe loss (warm start)", "probe_loss", [
          ("1 client", dict(part="paine3", clients=1)),
          *((f"{c} clients, sum, n_sync {n}", dict(part="paine3", clients=c, n_sync=n,
                                                    server_rule="sum", warm_start_momentum=True))
            for c, n in ((2, 4), (2, 32), (8, 1), (8, 4))),
          *((f"8 clients, average, n_sync {n}", dict(part="paine3", clients=8, n_sync=n,
                                                      server_rule="average"))
            for n in rules.PAINE3_AVERAGED)])]


def plot(result: dict, path: str) -> None:
  """Three panels (`plot_lines`), each line the mean over the seeds whose run did not diverge:
  Experiment 1's test top-1 against client steps; Experiment 2's probe loss (1, 8 and 32
  clients); Experiment 3's probe loss (1 client; 2 and 8 clients after the warm start)."""
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt
  runs = result["runs"]
  figure, axes = plt.subplots(1, 3, figsize=(16, 4.5))
  curves = [(ax, *panel) for ax, panel in zip(axes, plot_lines(result))]
  for ax, title, key, lines in curves:
    for label, fields in lines:
      chosen = list(rules.select(runs, **fields).values())
      whole = [r for r in chosen if r.get("diverged_at_step") is None]  # a NaN ends a curve.
      if len(whole) < len(chosen):
        label += f" ({len(chosen) - len(whole)} of {len(chosen)} diverged)"
      if not whole:
        ax.plot([], [], label=label)
        continue
      if key == "eval_top1":
        steps = [s for s, _ in whole[0][key]]
        values = [statistics.mean(r[key][i][1] for r in whole) for i in range(len(steps))]
      else:
        steps = list(range(1, len(whole[0][key]) + 1))
        values = [statistics.mean(r[key][i] for r in whole) for i in range(len(steps))]
      ax.plot(steps, values, label=label, linewidth=1)
    ax.set(title=title, xlabel="client steps", ylabel=f"{title.split(' (')[0]} (mean of seeds)",
           yscale="log" if key == "probe_loss" else "linear")  # a diverging run's spikes.
    ax.legend(fontsize=6)
  figure.tight_layout()
  figure.savefig(path, dpi=100)


if __name__ == "__main__":
  app.run(main)

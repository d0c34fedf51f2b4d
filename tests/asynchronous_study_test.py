"""The rules of benchmarks/papers/asynchronous_findings.py: how a run's curve becomes steps to a
target, a speed-up with its interval, a verdict — and that a baseline that never reaches its target
cannot make a method look faster or slower."""

import math

from absl.testing import absltest

from benchmarks.papers import asynchronous_findings as rules


def run(seed, curve, **fields):
  """A run of `seed` whose test top-1 after each 10 steps is `curve`."""
  return {"seed": seed, "eval_top1": [[10 * (i + 1), v] for i, v in enumerate(curve)],
          "final_eval_top1": curve[-1], **fields}


class StepsToTest(absltest.TestCase):

  def test_the_crossing_is_interpolated_between_evaluations(self):
    self.assertEqual(rules.steps_to(run(0, [0.2, 0.6, 0.9]), 0.8), 20 + 10 * (0.2 / 0.3))
    self.assertEqual(rules.steps_to(run(0, [0.9]), 0.45), 5.0)  # from 0 at step 0.
    self.assertEqual(rules.steps_to(run(0, [0.2, 0.7]), 0.8), math.inf)


class SpeedupTest(absltest.TestCase):

  def test_a_method_twice_as_fast_on_every_seed(self):
    baseline = {s: run(s, [0.1, 0.3, 0.5, 0.95]) for s in range(5)}  # 40 steps to 0.95.
    method = {s: run(s, [0.5, 0.95]) for s in range(5)}  # 20 steps.
    result = rules.speedup(baseline, method, 0.95)
    self.assertEqual((result["n"], result["geometric_mean"]), (5, 2.0))
    self.assertTrue(rules.faster(result))
    # Priced: a method step 2.5× as long is slower in time.
    priced = rules.speedup(baseline, method, 0.95, method_step_s=2.5)
    self.assertEqual(priced["geometric_mean"], 0.8)
    self.assertFalse(rules.faster(priced))

  def test_a_baseline_that_never_reaches_the_target_scores_nothing(self):
    # The draft's defect: a baseline at `inf` made every method "not faster" (or infinitely
    # faster). Its seeds are left out; with fewer than three left the claim is not testable.
    never = {s: run(s, [0.1, 0.2, 0.3]) for s in range(5)}
    method = {s: run(s, [0.96]) for s in range(5)}
    result = rules.speedup(never, method, 0.95)
    self.assertEqual((result["n"], result["baseline_missed"]), (0, [0, 1, 2, 3, 4]))
    self.assertIsNone(rules.faster(result))
    self.assertEqual(rules.verdict(rules.faster(result)), "not_testable")
    # Three seeds whose baseline reaches it are enough.
    mixed = {**never, **{s: run(s, [0.5, 0.96]) for s in (2, 3, 4)}}
    self.assertTrue(rules.faster(rules.speedup(mixed, method, 0.95)))

  def test_a_method_that_misses_where_its_baseline_reaches_is_not_faster(self):
    baseline = {s: run(s, [0.5, 0.96]) for s in range(5)}
    method = {**{s: run(s, [0.96]) for s in range(4)}, 4: run(4, [0.5, 0.6])}
    result = rules.speedup(baseline, method, 0.95)
    self.assertEqual(result["method_missed"], [4])
    self.assertFalse(rules.faster(result))


class IntervalTest(absltest.TestCase):

  def test_student_t_over_the_seeds(self):
    ci = rules.interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)  # t(0.975, 4) · sd / √n.
    self.assertEqual(ci["mean"], 3.0)
    self.assertAlmostEqual(ci["ci95"][0], 3.0 - half, places=4)
    self.assertIsNone(rules.interval([1.0, 2.0]))  # fewer than three seeds: none.
    self.assertTrue(rules.above(rules.interval([1.0, 1.1, 0.9])))
    self.assertIsNone(rules.below(None))

  def test_paired_by_seed_over_the_seeds_both_have(self):
    a = {s: {"x": s + 1.0} for s in range(5)}
    b = {s: {"x": float(s)} for s in range(1, 6)}
    ci = rules.paired(a, b, lambda r: r["x"])
    self.assertEqual((ci["n"], ci["mean"], ci["sd"]), (4, 1.0, 0.0))


class CurveTest(absltest.TestCase):

  def test_a_zigzag_of_period_n_sync_is_rough_and_a_ramp_is_not(self):
    ramp = [2.0 - 0.005 * t for t in range(360)]
    zigzag = [v + (0.1 if t % 32 < 16 else -0.1) for t, v in enumerate(ramp)]
    self.assertLess(rules.roughness(ramp, 180, 360), 1e-9)
    self.assertGreater(rules.roughness(zigzag, 180, 360), 0.05)
    self.assertAlmostEqual(rules.slope_per_100_steps(ramp, 0, 360), -0.5)

  def test_a_setting_is_collapsed_when_every_seed_ends_below_twice_chance(self):
    fields = dict(part="momentum", clients=8, n_sync=32, momentum=0.9, effective_step=1.0,
                  server_rule="average")
    runs = [run(s, [0.1 + 0.01 * s], label="a", **fields) for s in range(5)]
    runs += [run(s, [0.1, 0.5 if s == 3 else 0.1], label="b", **fields) for s in range(5)]
    self.assertEqual(rules.collapsed(runs), [{**{k: v for k, v in fields.items()
                                                 if k != "part"}, "seeds": 5}])


if __name__ == "__main__":
  absltest.main()

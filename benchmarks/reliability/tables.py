"""The table of benchmarks/reliability/soak.py (docs/faults.md), from soak.json."""

from benchmarks import table


def soak(result) -> str:
  """A run killed and restarted again and again against an uninterrupted one."""
  yes = lambda x: "yes" if x is True else ("no" if x is False else x)
  return table(["what", "result"], ([what, yes(value)] for what, value in (
      ("run", f"{result['config']}, {result['steps']} steps, kill moments drawn with seed "
              f"{result['seed']}"),
      ("SIGKILLs survived", result["sigkills"]),
      ("of them during a checkpoint save", result["sigkills_during_a_save"]),
      ("then SIGTERM and SIGINT, each followed by a restart",
       ", ".join(f"{e['signal']} → exit {e['exit']}" for e in result["events"]
                 if e["signal"] != "SIGKILL")),
      ("final parameters and optimiser state bitwise equal to the uninterrupted run's",
       result["final_state_bitwise_equal"]),
      ("checkpoints left on disk readable", result["checkpoints_readable"]),
      ("metrics.jsonl holds each step once", result["metrics_each_step_once"]),
      ("TensorBoard holds each step once", result["tensorboard_each_step_once"]),
      ("wall-clock: uninterrupted / interrupted (s)",
       f"{result['uninterrupted_s']} / {result['interrupted_s']}"),
      ("time lost to the interruptions (s)", result["time_lost_s"]))))


TABLES = {"soak": (soak, "soak.json")}

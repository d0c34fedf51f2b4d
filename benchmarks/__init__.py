"""Benchmarks, each run from the repository root as `python -m benchmarks.NAME` (`--help` lists
its flags); each prints JSON and writes its figures into docs/."""

"""Analysis of the schemes, outside the training path: the analytic cost model (costmodel) and the
collective traffic of compiled programs (hlo_stats). Imported by benchmarks, tests and the
notebook; nothing that trains imports it."""

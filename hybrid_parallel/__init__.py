"""AlexNet's parallelisation schemes on a ("data", "model") JAX device mesh.

The flat core, each module importing only those before it: errors, checks; mesh, collectives,
compiler_options; layers, models, partitioning (the schemes' registry and how each splits),
optim, train_state; then steps/ (common, then the synchronous step's backends: explicit, gspmd,
pmap, variable_batch), local_sgd/ (core, averaging, asgd), schemes (the one entry point). Beside
them, imported by the loop and not by the core: checkpointing, faults, metric_writers, profiling,
platforms; and analysis/ (the cost model, HLO accounting), which nothing in the training path
imports.
"""

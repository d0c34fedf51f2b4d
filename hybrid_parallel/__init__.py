"""AlexNet's parallelisation schemes on a ("data", "model") JAX device mesh.

The flat core, in dependency order: errors, mesh, layers, models, partitioning, train_state,
optim, collectives, compiler_options; then steps/ (the synchronous step's backends), local_sgd/
(averaging, A-SGD), schemes; beside them checkpointing, faults, metric_writers, profiling; and
analysis/ (cost model, HLO accounting), which nothing in the training path imports.
"""

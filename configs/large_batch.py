r"""Large-batch training on digits: 8× the reference batch with the linear rule and gradual warmup.

The base recipe of benchmarks/papers/large_batch.py, which sweeps the global batch (32 → 1024)
and the rule (none / linear / linear + warmup / LARS) around it at equal epochs. The model is
AlexNet-BN at tiny width (the LARS paper's model; batch statistics per worker), so that the sweep's 24 runs
take minutes on a CPU.

  python main.py --config=configs/large_batch.py
  python main.py --config=configs/large_batch.py --config.optimizer=lars \
      --config.base_learning_rate=0.25   # LARS's η at batch 32

η = 0.25 is the best LARS rate of benchmarks/papers/large_batch.py's grid, tuned on the full-width
alexnet (docs/large_batch.md: 94.9 ± 0.6% over three seeds at batch 256, 15 epochs; 98.89% for
alexnet_bn, one seed); η = 2.0 failed there (10.28% for alexnet). At tiny width it was not
searched, and the sweep's alexnet_bn_tiny trails linear + warmup with it (79.2 ± 9.2% against
91.0 ± 5.6% at batch 256, three seeds).
"""

from configs import default


def get_config():
  config = default.get_config()
  config.model = "alexnet_bn_tiny"
  config.global_batch_size = 256
  # Goyal et al.: η for the reference batch, × k for k times the batch, reached by a gradual
  # warmup from η; cosine decay to zero over the rest of the run.
  config.reference_batch_size = 32
  config.base_learning_rate = 0.02
  config.lr_scaling = "linear"
  config.warmup_epochs = 5
  config.warmup = "gradual"
  config.lr_decay = "cosine"
  config.num_epochs = 30
  config.log_every_steps = 5
  config.eval_every_steps = 1000  # evaluate at the end only (the sweep compares final accuracy).
  return config

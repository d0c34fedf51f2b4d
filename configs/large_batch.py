r"""Large-batch training on digits: 8× the reference batch with the linear rule and gradual warmup.

The base recipe of benchmarks/papers/large_batch.py, which sweeps the global batch (32 → 1024)
and the rule (none / linear / linear + warmup / LARS) around it at equal epochs. The model is
AlexNet-BN at tiny width (the LARS paper's model; batch statistics per worker), so that the sweep's
runs take minutes on a CPU: batch 256 from η = 0.02 per 32 images, 5 epochs of gradual warmup to
8 × η, cosine decay over 30 epochs (150 steps).

  python main.py --config=configs/large_batch.py
  python main.py --config=configs/large_batch.py --config.optimizer=lars \
      --config.base_learning_rate=0.25   # LARS's η at batch 32

Expected: about 98.5% test top-1 on digits. Cost: about 1 minute on a 2-core CPU;
docs/configs.md has the measured run. With LARS, η = 0.25 is the best rate of the sweep's grid
on the full-width alexnet (docs/large_batch.md); at this tiny width it was not searched.
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

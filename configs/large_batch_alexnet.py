r"""The full 2012 AlexNet (LRN, no batch norm) at 8× the reference batch with LARS and warmup.

You, Gitman & Ginsburg (2017): linear scaling + warmup does not carry AlexNet without batch norm
to large batches; LARS does. This is benchmarks/papers/large_batch.py's LARS cell at batch 256,
8× the reference 32, on digits at 64², one device, 15 epochs (75 steps): LARS's rate η = 0.25 per
32 images, scaled linearly to 2.0 at 256 and reached by a 3-epoch gradual warmup, trust
coefficient 0.001, then cosine decay; momentum 0.9, weight decay 5e-4.

  python main.py --config=configs/large_batch_alexnet.py

Expected: about 95% test top-1 on digits (94.9 ± 0.6% over seeds 0-2, against 25.6 ± 19.0% for
linear scaling + warmup at the same batch; docs/large_batch.md). Cost: about 1 minute on a 2-core
CPU; docs/configs.md has the measured run.
"""

from configs import default


def get_config():
  config = default.for_scheme("single", 1, 1, global_batch_size=256)
  config.model = "alexnet"
  config.num_epochs = 15
  config.optimizer = "lars"
  config.lars_trust_coefficient = 0.001
  config.reference_batch_size = 32
  config.base_learning_rate = 0.25  # LARS's η per 32 images: 2.0 at 256.
  config.lr_scaling = "linear"
  config.warmup = "gradual"
  config.warmup_epochs = 3
  config.lr_decay = "cosine"
  config.eval_batch_size = 120
  config.eval_every_steps = 1000  # at the end (the sweep compares final accuracy).
  return config

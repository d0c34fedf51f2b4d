r"""The full 2012 AlexNet (LRN, no batch norm) at 8× the reference batch with LARS and warmup.

You, Gitman & Ginsburg (2017): linear scaling + warmup does not carry AlexNet without batch norm
to large batches; LARS does. This is benchmarks/papers/large_batch.py's LARS cell at batch 256,
8× the reference 32, on digits at 64², one device, 15 epochs (75 steps): LARS's rate η = 0.25 per
32 images, scaled linearly to 2.0 at 256 and reached by a 3-epoch gradual warmup, trust
coefficient 0.001, then cosine decay; momentum 0.9, weight decay 5e-4.

  python main.py --config=configs/large_batch_alexnet.py

Measured by benchmarks/papers/large_batch.py on seeds 0-2 (seed 0 on 2026-11-22, seeds 1 and 2
on 2026-11-26 on a 2-core Intel Xeon, ~50 s each): 94.9 ± 0.6% test top-1 (94.4, 94.7, 95.6; the
test set's sampling error ± 1.2), against 98.06% for batch 32 at the base rate (SGD, η = 0.01; the
same on each of the three seeds) over the same 15 epochs; SGD with linear scaling + warmup reaches
25.6 ± 19.0% at 256 (10.0, 20.0, 46.7). docs/large_batch.md has the sweep and every LARS setting
tried.
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

r"""A BN ResNet at 8× the reference batch with Goyal et al.'s linear scaling and gradual warmup.

Goyal et al. (2017): with η × k for k times the batch, reached by a gradual warmup, a ResNet with
batch norm trains at a large batch to its small batch's accuracy. This is
benchmarks/papers/large_batch.py's cell for `resnet_tiny` (torchvision's ResNet-50 blocks, one a
stage, widths ÷8) at batch 256, 8× the reference 32, on digits at 64², one device, 15 epochs (75
steps): η = 0.01 per 32 images, scaled linearly to 0.08 at 256 and reached by a 3-epoch gradual
warmup, then cosine decay; momentum 0.9, weight decay 5e-4; batch statistics per worker.

  python main.py --config=configs/large_batch_resnet.py

Expected: about 97% test top-1 on digits (seed 0). Cost: about 1.5 minutes on a 2-core CPU.
Over seeds 0-2 benchmarks/papers/large_batch.py measured 96.6 ± 0.9% against 96.7 ± 0.7% at
batch 32 over the same 15 epochs, where AlexNet without batch norm (alexnet_tiny) falls from
84.3 ± 8.0% to 53.8 ± 5.0% under the same rule: docs/large_batch.md has both and the verdict.
"""

from configs import default


def get_config():
  config = default.for_scheme("single", 1, 1, global_batch_size=256)
  config.model = "resnet_tiny"
  config.num_epochs = 15
  config.reference_batch_size = 32
  config.base_learning_rate = 0.01  # η per 32 images: 0.08 at 256.
  config.lr_scaling = "linear"
  config.warmup = "gradual"
  config.warmup_epochs = 3
  config.lr_decay = "cosine"
  config.eval_batch_size = 120
  config.eval_every_steps = 1000  # at the end (the sweep compares final accuracy).
  return config

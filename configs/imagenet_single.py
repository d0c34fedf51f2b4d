r"""ImageNet with the one-column AlexNet on one device: torchvision's recipe, Krizhevsky's data.

Prepare ImageNet once (shorter side 256, the central 256², JPEG q90; docs/input_pipeline.md has
the time and disk it takes), then train:

  python -m input_pipeline.prepare --source=imagenet2012 --out=DIR
  python main.py --config=configs/imagenet_single.py --config.dataset=prepared:DIR

Recipe (torchvision's reference for this net): batch 256, SGD with momentum 0.9, learning rate
0.01, weight decay 1e-4, 90 epochs, the rate ÷ 10 after epochs 30 and 60; random 224² crops of
the 256² images, flips and PCA lighting (Krizhevsky et al. 2012; torchvision uses random-resized
crops instead), evaluated on the centre crop. bfloat16 compute with float32 parameters.

Expected: 56.52% top-1 / 79.07% top-5 on the validation set (torchvision's published
`AlexNet_Weights.IMAGENET1K_V1`; the augmentation differs as said, so about that, not exactly).
Not yet measured here.

Expected time on one H200: at least 28 min (90 epochs × 1,281,167 images at the bare bfloat16
step's 69,037 images/s at batch 256, docs/gpu.md). The input bounds it: on a lent H100's 16-core
host (docs/input_pipeline.md), main.py fed by prepared JPEG q90 ran 9,386 images/s with a decoding
thread per core and 17,442 with `input_workers = 16` (0.15× and 0.27× the bare step; raw uint8
10,236 on threads) — at 17,442, 90 epochs take ~1.8 hours. Preparing ImageNet takes ~1.0
core-hour and 24.9 GB (raw: 262 GB) on the 2-core machine's cores, 1.6 on that host's.
"""

from configs import default


def get_config():
  config = default.for_scheme("single", 1, 1, global_batch_size=256)
  config.model = "alexnet_owt"
  config.dtype = "bfloat16"
  config.dataset = "prepared:imagenet2012-256-jpeg90"  # the --out of input_pipeline.prepare
  config.image_size = 224
  config.base_learning_rate = 0.01
  config.reference_batch_size = 256
  config.weight_decay = 1e-4
  config.num_epochs = 90
  config.lr_decay_epochs = (30, 60)
  config.eval_batch_size = 500  # 100 batches over the 50,000 validation images
  config.log_every_steps = 100
  config.eval_every_steps = 5004  # once per epoch (1,281,167 // 256 steps)
  config.checkpoint_every_steps = 5004
  return config

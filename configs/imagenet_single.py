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
step's 69,037 images/s at batch 256, docs/gpu.md); main.py there reached 25,362 images/s on
synthetic data before its input moved to a background thread (76 min at that rate). The input:
prepared JPEG q90 decodes 3,581 images/s per core here (docs/input_pipeline.md), so a 16-core
host feeds ~57,000 images/s, 83% of the step (34 min); raw uint8 (10,394 per core) does not
limit it. Preparing ImageNet takes ~1.0 core-hour and 24.9 GB (raw: 262 GB).
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

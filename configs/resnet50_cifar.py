r"""The BBVA post's run: MXNet's CIFAR-10 ResNet-50 data parallel on 8 devices, 256 images each.

The network MXNet's example/image-classification runs as `train_cifar10.py --network resnet
--num-layers 50` (models.py's `resnet50_cifar`: three stages of eight pre-activation basic blocks,
16-32-64 channels, 758,621 parameters, 85.6M multiply-adds an image at its 28² crops), trained
synchronously data parallel on an 8-device mesh with 256 images per device (global 2048), as the
post ran it on a p2.8xlarge's eight K80 processors; per-worker batch norm, as MXNet's.
MXNet's recipe (train_cifar10.py, common/fit.py): SGD at rate 0.05, momentum 0.9, weight decay
1e-4, the rate × 0.1 at 200 and 250 of 300 epochs; MXNet applies the rate as given, unscaled.

The post timed this step, not an accuracy, so the images here are synthetic (random pixels and
labels: `dataset = "synthetic"`, 16,384 at 28²): the step, its collectives and its throughput,
nothing to learn.

  python main.py --config=configs/resnet50_cifar.py --cpu_devices=8 --config.num_train_steps=20

Cost: 2048 images × 0.51 GFLOP (forward and backward) ≈ 1.05 TFLOP a step — minutes a step on a
2-core CPU: not run here end to end (an accelerator machine with 8 devices runs it as written).
"""

from configs import default

NOT_RUN_HERE = ("a step of 2048 images of ~1 TFLOP takes minutes on a 2-core CPU; 300 epochs would "
                "take weeks")

def get_config():
  config = default.for_scheme("data", 8, 1, global_batch_size=8 * 256)
  config.model = "resnet50_cifar"
  config.image_size = 28
  config.dataset = "synthetic"
  config.synthetic_examples = 16384
  config.synthetic_classes = 10
  config.base_learning_rate = 0.05
  config.reference_batch_size = 128
  config.lr_scaling = "none"
  config.weight_decay = 1e-4
  config.lr_decay = "step"
  config.lr_decay_factor = 0.1
  config.lr_decay_epochs = (200, 250)
  config.num_epochs = 300
  config.eval_batch_size = 256
  return config

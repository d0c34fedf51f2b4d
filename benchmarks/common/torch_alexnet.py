"""PyTorch's training step of torchvision's AlexNet (our `alexnet_owt`), for comparisons only.

No flags and no JAX here, so that the benchmarks that compare against PyTorch can run it in a
worker process of its own. PyTorch is not a dependency of the project: only what calls these
functions needs it.
"""


def feature_map_side(image_size: int) -> int:
  """Side of the last conv stage's output (6 at 224²; as models.Architecture computes it)."""
  side = (image_size + 2 * 2 - 11) // 4 + 1  # conv1 11×11 / 4, padding 2
  side = (side - 3) // 2 + 1  # pool
  side = (side - 3) // 2 + 1  # conv2 keeps the side; pool
  return (side - 3) // 2 + 1  # conv3–5 keep it; pool


def space_to_depth_stem():
  """conv1 (11×11, stride 4, padding 2) as our `stem_conv = "space_to_depth"` computes it: the
  padded image cut into 4×4 blocks stacked as 48 channels, then a 3×3 stride-1 conv (the kernel
  padded to 12×12): the same output side, the same work, a shape the libraries run faster."""
  from torch import nn

  class SpaceToDepthStem(nn.Module):
    def __init__(self):
      super().__init__()
      self.conv = nn.Conv2d(3 * 4 * 4, 64, 3)

    def forward(self, x):
      return self.conv(nn.functional.pixel_unshuffle(nn.functional.pad(x, (2, 2, 2, 2)), 4))

  return SpaceToDepthStem()


def alexnet(classes: int, image_size: int = 224, *, space_to_depth: bool = False):
  """torchvision.models.alexnet, written out so that torchvision is not needed; its adaptive
  average pool is the identity at 224² (the feature map is already 6×6) and is left out, so that
  at other sizes the FC input is the feature map, as in our `alexnet_owt`. `space_to_depth`
  computes conv1 as `space_to_depth_stem` does."""
  from torch import nn
  side = feature_map_side(image_size)
  stem = space_to_depth_stem() if space_to_depth else nn.Conv2d(3, 64, 11, stride=4, padding=2)
  return nn.Sequential(
      stem, nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
      nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
      nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
      nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
      nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
      nn.Flatten(), nn.Dropout(0.5), nn.Linear(256 * side * side, 4096), nn.ReLU(inplace=True),
      nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Linear(4096, classes))


def make_step(batch: int, image_size: int, classes: int, *, device: str = "cpu",
              bfloat16: bool = False, channels_last: bool = False, compiled: bool = False,
              space_to_depth: bool = False):
  """One whole training step — forward, backward, SGD update (momentum 0.9, weight decay 5e-4),
  the loss back on the host — on one fixed synthetic batch, as a no-argument callable.

  Args:
    device: "cpu" or "cuda".
    bfloat16: run the forward pass under bfloat16 autocast (parameters stay float32), as our
      `dtype = "bfloat16"` does.
    channels_last: NHWC memory format for the images and the convolutions.
    compiled: `torch.compile` the model (default mode).
    space_to_depth: conv1 as `space_to_depth_stem` (our GPU default stem), so that a comparison
      with our step compares frameworks, not stems.
  """
  import torch
  from torch import nn

  model = alexnet(classes, image_size, space_to_depth=space_to_depth).to(device)
  model.train()
  memory_format = torch.channels_last if channels_last else torch.contiguous_format
  model = model.to(memory_format=memory_format)
  forward = torch.compile(model) if compiled else model
  optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
  generator = torch.Generator().manual_seed(0)
  images = torch.randn(batch, 3, image_size, image_size, generator=generator).to(
      device, memory_format=memory_format)
  labels = torch.randint(0, classes, (batch,), generator=generator).to(device)
  loss_fn = nn.CrossEntropyLoss()

  def step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bfloat16):
      loss = loss_fn(forward(images), labels)
    loss.backward()
    optimizer.step()
    loss.item()  # waits for the device, as our step's metrics do.

  return step



# The variants a GPU comparison times (benchmarks/speed/accelerator.py): name -> make_step options.
GPU_VARIANTS = {
    "eager float32": {},
    "eager float32 channels_last": dict(channels_last=True),
    "eager bfloat16 autocast channels_last": dict(bfloat16=True, channels_last=True),
    "compiled float32 channels_last": dict(channels_last=True, compiled=True),
    "compiled bfloat16 autocast channels_last": dict(bfloat16=True, channels_last=True,
                                                     compiled=True),
    "compiled bfloat16 autocast channels_last, space-to-depth stem": dict(
        bfloat16=True, channels_last=True, compiled=True, space_to_depth=True),
}

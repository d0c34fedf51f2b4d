"""torchvision's ResNet-50, written out, and the reference its parity test reads (our `resnet50`).

torchvision.models.resnet50 (torchvision/models/resnet.py: `Bottleneck`, `ResNet`, layers
[3, 4, 6, 3]) needs torchvision, which a CPU build of PyTorch does not always import beside; the
network is written out here as torchvision defines it, module names included, so that its
state_dict has torchvision's keys. No JAX here, and PyTorch only inside the functions that run
it: the parity test (tests/models_test.py) reads the reference this module wrote and runs without
PyTorch, since PyTorch is no dependency of the project (the CPU build a test needs is not on the
package index; the index's build brings several GB of CUDA libraries).

Regenerate the reference where PyTorch is installed (any version; it records its own):

  python -c "from benchmarks.common import torch_resnet; torch_resnet.write_reference()"
"""

import os

import numpy as np

REFERENCE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "tests", "data", "resnet50_torch.npz")
# The reference's inputs: a batch of 4 images at 64² (the network is the same at any size; 64²
# leaves its last stage 2×2 and keeps the test's CPU time to seconds), 1000 classes.
BATCH, IMAGE_SIZE, CLASSES = 4, 64, 1000
SEED = 0
SAMPLED = 256  # gradient entries recorded per parameter (all of a smaller one).


def resnet50(classes: int = CLASSES):
  """torchvision.models.resnet50(num_classes=classes), its initialisation included."""
  from torch import nn

  class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
      super().__init__()
      width = planes
      self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
      self.bn1 = nn.BatchNorm2d(width)
      self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
      self.bn2 = nn.BatchNorm2d(width)
      self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
      self.bn3 = nn.BatchNorm2d(planes * self.expansion)
      self.relu = nn.ReLU(inplace=True)
      self.downsample = downsample

    def forward(self, x):
      identity = x
      out = self.relu(self.bn1(self.conv1(x)))
      out = self.relu(self.bn2(self.conv2(out)))
      out = self.bn3(self.conv3(out))
      if self.downsample is not None:
        identity = self.downsample(x)
      return self.relu(out + identity)

  class ResNet(nn.Module):
    def __init__(self, layers, num_classes):
      super().__init__()
      self.inplanes = 64
      self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
      self.bn1 = nn.BatchNorm2d(64)
      self.relu = nn.ReLU(inplace=True)
      self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
      self.layer1 = self._make_layer(64, layers[0])
      self.layer2 = self._make_layer(128, layers[1], stride=2)
      self.layer3 = self._make_layer(256, layers[2], stride=2)
      self.layer4 = self._make_layer(512, layers[3], stride=2)
      self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
      self.fc = nn.Linear(512 * Bottleneck.expansion, num_classes)
      for m in self.modules():
        if isinstance(m, nn.Conv2d):
          nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
          nn.init.constant_(m.weight, 1)
          nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride=1):
      downsample = None
      if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
        downsample = nn.Sequential(
            nn.Conv2d(self.inplanes, planes * Bottleneck.expansion, 1, stride=stride, bias=False),
            nn.BatchNorm2d(planes * Bottleneck.expansion))
      layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
      self.inplanes = planes * Bottleneck.expansion
      layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
      return nn.Sequential(*layers)

    def forward(self, x):
      x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
      x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
      return self.fc(self.avgpool(x).flatten(1))

  return ResNet([3, 4, 6, 3], classes)


def random_state(names, shapes, seed: int = SEED) -> dict:
  """Values for every entry of a ResNet state_dict (`names` with their `shapes`), drawn in that
  order from one numpy RandomState: the same numbers on every machine and numpy version (the
  legacy generator is frozen). Not an initialisation: BN scales, shifts and running statistics
  away from 1 and 0, so that the test sees each of them act."""
  rng = np.random.RandomState(seed)
  state = {}
  for name, shape in zip(names, shapes):
    shape = tuple(int(d) for d in shape)
    if name.endswith("num_batches_tracked"):
      continue
    if len(shape) == 4:  # conv kernels [O, I, k, k]: He et al.'s scale over fan_out.
      value = rng.standard_normal(shape) * np.sqrt(2.0 / (shape[0] * shape[2] * shape[3]))
    elif len(shape) == 2:  # fc [classes, 2048].
      value = rng.standard_normal(shape) / np.sqrt(shape[1])
    elif name.endswith(("weight", "running_var")):  # BN scale, running variance.
      value = rng.uniform(0.5, 1.5, shape)
    else:  # BN shift, running mean, fc bias.
      value = rng.standard_normal(shape) * 0.1
    state[name] = value.astype(np.float32)
  return state


def inputs(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
  """The images (NCHW) and the logits' weights of the loss sum(logits · weights)."""
  rng = np.random.RandomState(seed + 1)
  images = rng.standard_normal((BATCH, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
  return images, rng.standard_normal((BATCH, CLASSES)).astype(np.float32)


def sampled_entries(name_index: int, size: int, seed: int = SEED) -> np.ndarray:
  """The flat indices (torch layout) of the gradient entries recorded for one parameter."""
  if size <= SAMPLED:
    return np.arange(size)
  return np.sort(np.random.RandomState(seed + 2 + name_index).choice(size, SAMPLED,
                                                                     replace=False))


def reference(dtype: str) -> dict:
  """PyTorch's logits and gradients of resnet50 on `random_state` and `inputs`, in `dtype`
  ("float32" or "float64"): train-mode logits (batch statistics), the gradient of
  sum(logits · weights) sampled (`sampled_entries`) and its norm per parameter, and eval-mode
  logits (running statistics)."""
  import torch

  torch.manual_seed(SEED)
  model = resnet50()
  names = [k for k in model.state_dict()]
  shapes = [tuple(v.shape) for v in model.state_dict().values()]
  state = random_state(names, shapes)
  model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
  model = model.to(getattr(torch, dtype))
  images, weights = (torch.from_numpy(a).to(getattr(torch, dtype)) for a in inputs())
  model.train()
  logits = model(images)
  (logits * weights).sum().backward()
  out = {"train_logits": logits.detach().numpy()}
  parameters = dict(model.named_parameters())
  for i, name in enumerate(n for n in names if n in parameters):
    grad = parameters[name].grad.detach().numpy().reshape(-1)
    out[f"grad_sample/{name}"] = grad[sampled_entries(i, grad.size)]
    out[f"grad_norm/{name}"] = np.linalg.norm(grad.astype(np.float64))
  model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
  model.eval()
  with torch.no_grad():
    out["eval_logits"] = model(images).numpy()
  return out


def write_reference(path: str = REFERENCE) -> None:
  """Writes `reference` in float32 and float64, with the state's names and shapes, to `path`."""
  import torch

  model = resnet50()
  names = [k for k in model.state_dict() if not k.endswith("num_batches_tracked")]
  shapes = [tuple(model.state_dict()[k].shape) for k in names]
  arrays = {"names": np.array(names), "torch_version": np.array(torch.__version__)}
  for i, shape in enumerate(shapes):
    arrays[f"shape/{names[i]}"] = np.array(shape, np.int64)
  for dtype in ("float32", "float64"):
    arrays.update({f"{dtype}/{k}": v for k, v in reference(dtype).items()})
  np.savez_compressed(path, **arrays)

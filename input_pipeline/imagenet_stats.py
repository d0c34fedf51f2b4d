"""ImageNet's published pixel statistics and Krizhevsky's crop geometry, shared by the TensorFlow
augmentation (augment.py, tfds sources) and the on-device one (device_augment.py)."""

# Per channel, RGB, in 0..255 units (the values torchvision and most ImageNet pipelines use).
MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)

# The principal components of ImageNet's RGB pixels scaled to [0, 1], as published with
# fb.resnet.torch and used by most ImageNet pipelines since: eigenvalues, then eigenvectors as
# columns (R, G, B rows).
EIGVAL = (0.2175, 0.0188, 0.0045)
EIGVEC = ((-0.5675, 0.7192, 0.4009),
          (-0.5808, -0.0045, -0.8140),
          (-0.5836, -0.6948, 0.4203))

# Crop offsets of the ten-crop evaluation, in order: the centre, then the four corners (each
# evaluation then adds the same five flipped).
TEN_CROP_ORDER = ("centre", "top_left", "top_right", "bottom_left", "bottom_right")


def resize_size(image_size: int) -> int:
  """The shorter side images are resized to before cropping: 256 for a 224 crop (Krizhevsky et
  al. 2012 stored ImageNet at 256×256 and trained on random 224×224 crops)."""
  return round(image_size * 256 / 224)


def crop_offset(corner: str, *, height: int, width: int, size: int) -> tuple[int, int]:
  """(top, left) of the `size`² crop at `corner` of a height×width image."""
  top = {"centre": (height - size) // 2, "top_left": 0, "top_right": 0,
         "bottom_left": height - size, "bottom_right": height - size}[corner]
  left = {"centre": (width - size) // 2, "top_left": 0, "top_right": width - size,
          "bottom_left": 0, "bottom_right": width - size}[corner]
  return top, left

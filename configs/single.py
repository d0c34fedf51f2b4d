r"""Yadan et al. 2013, Table 1, row 1: AlexNet on one device, mini-batch 256.

  python main.py --config=configs/single.py

Expected: ≥ 90% test top-1 on digits after 30 epochs (measured: see README), the reference that
every other Table-1 config should match within about a point.
"""

from configs import default


def get_config():
  return default.for_scheme("single", 1, 1)

r"""Yadan et al. 2013, Table 1, row 1: AlexNet on one device, mini-batch 256.

  python main.py --config=configs/single.py

Expected: about 96.7% test top-1 on digits after 150 steps (30 epochs): the reference every
other Table-1 config matches within about a point (docs/schemes.md's table: measured runs, with
their wall-clock on a 2-core CPU).
"""

from configs import default


def get_config():
  return default.for_scheme("single", 1, 1)

r"""Yadan et al. 2013, Table 1, row 1: AlexNet on one device, mini-batch 256.

  python main.py --config=configs/single.py

Expected: 96.67% test top-1 on digits after 150 steps (30 epochs); 275 s on a 2-core CPU.
The reference every other Table-1 config matches within about a point.
"""

from configs import default


def get_config():
  return default.for_scheme("single", 1, 1)

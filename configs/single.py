r"""Yadan et al. 2013, Table 1, row 1: AlexNet on one device, mini-batch 256, 150 steps (30 epochs).

  python main.py --config=configs/single.py

Expected: about 96% test top-1 on digits: the reference every other Table-1 config matches
within about a point. Cost: about 3.5 minutes on a 2-core CPU; docs/configs.md has the measured
run.
"""

from configs import default


def get_config():
  return default.for_scheme("single", 1, 1)

r"""Yadan et al. 2013, Table 1, row 5: AlexNet model + data parallel on 4 devices (2 × 2).

Two data-parallel groups of 128 images; within each, the two columns of the 2012 net on two devices.
This was the paper's fastest configuration (4.8 days vs 10.5 on one GPU).

  python main.py --config=configs/hybrid4.py

Expected: single's test top-1 on digits within about a point (docs/schemes.md's table of every
config trained end to end; on a CPU, 4 simulated devices).
"""

from configs import default


def get_config():
  return default.for_scheme("hybrid", 2, 2)

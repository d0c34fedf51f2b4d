r"""Yadan et al. 2013, Table 1, row 5: AlexNet model + data parallel on 4 devices (2 × 2).

Two data-parallel groups of 128 images; within each, the two columns of the 2012 net on two
devices. This was the paper's fastest configuration (4.8 days against 10.5 on one GPU).

  python main.py --config=configs/hybrid4.py

Expected: about 96% test top-1 on digits, single's within about a point (the same SGD). Cost:
about 2 minutes on a 2-core CPU, 4 simulated devices; docs/configs.md has the measured run.
"""

from configs import default


def get_config():
  return default.for_scheme("hybrid", 2, 2)

r"""Yadan et al. 2013, Table 1, row 2: AlexNet model-parallel on 2 devices, mini-batch 256.

Each device holds one of Krizhevsky et al. 2012's two columns: half the filters of every conv layer
and half the neurons of every FC layer; activations cross at conv3 and the FC layers.

  python main.py --config=configs/model2.py

Expected: about 96% test top-1 on digits, single's within about a point (the same SGD). Cost:
about 2.5 minutes on a 2-core CPU, 2 simulated devices; docs/configs.md has the measured run.
"""

from configs import default


def get_config():
  return default.for_scheme("model", 1, 2)

r"""Yadan et al. 2013, Table 1, row 2: AlexNet model-parallel on 2 devices, mini-batch 256.

Each device holds one of Krizhevsky et al. 2012's two columns: half the filters of every conv layer
and half the neurons of every FC layer; activations cross at conv3 and the FC layers.

  python main.py --config=configs/model2.py

Expected: single's test top-1 on digits within about a point (docs/schemes.md's table).
"""

from configs import default


def get_config():
  return default.for_scheme("model", 1, 2)

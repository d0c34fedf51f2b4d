r"""Su, Chen & Morgan: model averaging on 4 replicas, butterfly mixing every 4 steps.

Each replica runs SGD on 64 of the 256 images of every step; after every 4th step each averages
its parameters and momentum with its butterfly partner (one stage per sync, Zhao & Canny), so two
syncs mix all four replicas.

  python main.py --config=configs/averaging4.py

Expected: single's test top-1 on digits within about a point (docs/schemes.md's table).
"""

from configs import default


def get_config():
  config = default.for_scheme("averaging", 4, 1)
  config.sync_every = 4
  config.average_method = "butterfly"
  return config

r"""Su, Chen & Morgan: model averaging on 4 replicas, butterfly mixing every 4 steps.

Each replica runs SGD on 64 of the 256 images of every step; after every 4th step each averages
its parameters and momentum with its butterfly partner (one stage per sync, Zhao & Canny), so two
syncs mix all four replicas.

  python main.py --config=configs/averaging4.py

Expected: about 96% test top-1 on digits, single's within about a point. Cost: about 3 minutes
on a 2-core CPU, 4 simulated devices; docs/configs.md has the measured run.
"""

from configs import default


def get_config():
  config = default.for_scheme("averaging", 4, 1)
  config.sync_every = 4
  config.average_method = "butterfly"
  return config

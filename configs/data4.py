r"""Yadan et al. 2013, Table 1, row 4: AlexNet data-parallel on 4 devices, 64 images each.

  python main.py --config=configs/data4.py

Expected: the same
test accuracy as configs/single.py (≥ 90% on digits); the same parameters up to float rounding.
"""

from configs import default


def get_config():
  config = default.get_config()
  config.parallelism = "data"
  config.mesh.data, config.mesh.model = 4, 1
  config.global_batch_size = 256
  return config

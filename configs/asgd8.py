r"""Paine et al. 2013's GPU A-SGD, with the server averaging: 8 clients and a parameter server.

Each client trains on 16 of the 128 images of every step with its own momentum and, every n_sync =
4 of its steps, pushes its change to the server and fetches the server's parameters, at staggered
phases (offsets ⌊4i/8⌋ = 0, 0, 1, 1, 2, 2, 3, 3: two clients meet the server at every step). The
server averages the clients' changes (`asgd_server_rule`), so the rate is the global batch's, as
under every scheme — not the summing reading of Paine's server, under which his "same settings"
collapse here (docs/asynchronous.md). The clients advance in lock-step (`asgd_step_times =
"equal"`); `--config.asgd_step_times=heavy_tailed` or `straggler` lets them step at their own
speeds. n_sync, momentum and rate are the asynchronous study's choice by time to accuracy and
final accuracy (`preset_choice` in benchmarks/papers/asynchronous_findings.py).

  python main.py --config=configs/asgd8.py

Expected: about 97.5% test top-1 on digits (seed 0; over other seeds, and against synchronous
data parallelism on the same 8 devices: docs/asynchronous.md). Cost: about 1 minute on a 2-core
CPU, 8 simulated devices; docs/configs.md has the measured run. It is slower than synchronous
training on equal GPUs by the time model (docs/asynchronous.md): use it to study A-SGD, not to
train faster.
"""

from configs import default


def get_config():
  config = default.for_scheme("asgd", 8, 1, global_batch_size=128)
  # The study's network: alexnet_tiny at 64², dropout 0.25 (its 64-unit FC layers lose too much
  # at 0.5: tests/train_test.py); 450 steps (40 epochs of 128 images), the rate × 0.1 after 60%.
  config.model = "alexnet_tiny"
  config.dropout_rate = 0.25
  config.num_train_steps = 450
  config.lr_decay_epochs = (270 / (1437 // 128),)
  config.n_push = config.n_fetch = 4
  config.asgd_step_times = "equal"
  config.asgd_server_rule = "average"
  config.momentum = 0.9
  config.base_learning_rate = 0.025
  config.reference_batch_size = 128  # the rate as given, for the global batch.
  config.eval_every_steps = 45
  config.log_every_steps = 45
  return config

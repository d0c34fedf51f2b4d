"""Every bad config value and flag is refused by main.py in one sentence, exit 1, before anything
is touched — here against a workdir holding a finished run, which must stay byte-identical."""

import dataclasses
import os
import re
import tempfile

from absl.testing import absltest, parameterized

import experiment
import train
import validation
from configs import default
from hybrid_parallel import checks
from hybrid_parallel.errors import UserError
from tests import testing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HYBRID4 = f"--config={ROOT}/configs/hybrid4.py"
DATA4 = f"--config={ROOT}/configs/data4.py"
AVERAGING4 = f"--config={ROOT}/configs/averaging4.py"
MODEL2 = f"--config={ROOT}/configs/model2.py"

# (flags after the config, the sentence's expected text). {file} is a regular file.
BAD = {
    "negative_epochs": ([HYBRID4, "--config.num_epochs=-3"],
                        "num_epochs must lie in (0, ∞), got -3"),
    "eval_every_zero": ([HYBRID4, "--config.eval_every_steps=0"],
                        "eval_every_steps must be at least 1, got 0."),
    "mesh_data_zero": ([HYBRID4, "--config.mesh.data=0"], "mesh.data must be at least 1, got 0."),
    "negative_learning_rate": ([HYBRID4, "--config.base_learning_rate=-0.1"],
                               "base_learning_rate must lie in (0, ∞), got -0.1."),
    "negative_warmup": ([HYBRID4, "--config.warmup_epochs=-1"],
                        "warmup_epochs must lie in [0, ∞), got -1"),
    "warmup_longer_than_run": ([HYBRID4, "--config.warmup_epochs=40"],
                               "warmup_epochs 40.0 is longer than the run's num_epochs 30"),
    "train_steps_zero": ([HYBRID4, "--config.num_train_steps=0"],
                         "num_train_steps must be -1 (train num_epochs) or at least 1, got 0."),
    "dropout_one": ([HYBRID4, "--config.dropout_rate=1.0"],
                    "dropout_rate must lie in [0, 1), got 1.0."),
    "momentum_above_one": ([HYBRID4, "--config.momentum=1.5"],
                           "momentum must lie in [0, 1), got 1.5."),
    "negative_weight_decay": ([HYBRID4, "--config.weight_decay=-1"],
                              "weight_decay must lie in [0, ∞), got -1"),
    "decay_factor_zero": ([HYBRID4, "--config.lr_decay_factor=0"],
                          "lr_decay_factor must lie in (0, 1], got 0"),
    "negative_decay_epoch": ([HYBRID4, "--config.lr_decay_epochs=(-2,)"],
                             "lr_decay_epochs must lie in [0, ∞), got -2."),
    "negative_multiplier": ([HYBRID4, "--config.lr_multipliers.conv=-2"],
                            "lr_multipliers.conv must lie in (0, ∞), got -2"),
    "keep_zero": ([HYBRID4, "--config.checkpoint_keep=0"],
                  "checkpoint_keep must be at least 1, got 0."),
    "negative_timeout": ([HYBRID4, "--config.step_timeout_s=-5"],
                         "step_timeout_s must lie in [0, ∞), got -5"),
    "negative_seed": ([HYBRID4, "--config.seed=-1"], "seed must be at least 0, got -1."),
    "one_class": ([HYBRID4, "--config.synthetic_classes=1"],
                  "synthetic_classes must be at least 2, got 1."),
    "unknown_model": ([HYBRID4, "--config.model=vgg"],
                      "unknown model 'vgg'; choose one of alexnet, alexnet_owt, alexnet_bn, "),
    "unknown_scheme": ([HYBRID4, "--config.parallelism=pipeline"],
                       "unknown parallelism 'pipeline'; choose one of single, data, model, "
                       "hybrid, owt, averaging, asgd."),
    "unknown_backend": ([HYBRID4, "--config.backend=xla"],
                        "unknown backend 'xla'; choose one of explicit, gspmd, pmap."),
    "unknown_reduction": ([HYBRID4, "--config.grad_reduce=gossip"],
                          "unknown grad_reduce 'gossip'; choose one of psum, ring, tree, "
                          "butterfly, parameter_server."),
    "unknown_dtype": ([HYBRID4, "--config.dtype=float16"],
                      "unknown dtype 'float16'; choose one of float32, bfloat16, float64."),
    "float64_without_x64": ([HYBRID4, "--config.dtype=float64"],
                            "dtype 'float64' needs 64-bit JAX (JAX_ENABLE_X64=1, or inside "
                            "jax.enable_x64(True)); train with float32 or bfloat16."),
    "unknown_optimizer": ([HYBRID4, "--config.optimizer=adam"],
                          "unknown optimizer 'adam'; choose one of sgd, lars."),
    "unknown_scaling": ([HYBRID4, "--config.lr_scaling=cubic"], "unknown lr_scaling 'cubic'"),
    "unknown_decay": ([HYBRID4, "--config.lr_decay=poly"], "unknown lr_decay 'poly'"),
    "unknown_warmup": ([HYBRID4, "--config.warmup=linear"], "unknown warmup 'linear'"),
    "unknown_max_pool": ([HYBRID4, "--config.max_pool=average"],
                         "unknown max_pool 'average'; choose one of auto, argmax, "
                         "reduce_window."),
    "unknown_owt_variant": ([HYBRID4, "--config.owt_variant=d"],
                            "unknown owt_variant 'd'; choose one of a, b, c."),
    "negative_warm_start": ([DATA4, "--config.parallelism=asgd", "--config.warm_start_steps=-1"],
                            "warm_start_steps must be at least 0, got -1."),
    "unknown_dataset": ([HYBRID4, "--config.dataset=imagenet21k"],
                        "unknown dataset 'imagenet21k'; choose one of digits, synthetic, "
                        "npz:PATH, imagenet2012"),
    "missing_npz": ([HYBRID4, "--config.dataset=npz:no/such/file.npz"],
                    "dataset file 'no/such/file.npz' does not exist."),
    "unknown_field": ([HYBRID4, "--config.batchsize=8"],
                      "the config has no such field: 'batchsize'"),
    "misspelt_field": ([HYBRID4, "--config.batch_szie=8"],
                       "error: the config has no such field: 'batch_szie'; did you mean "
                       "'eval_batch_size' or 'global_batch_size' or 'reference_batch_size'?"),
    "misspelt_nested_field": ([HYBRID4, "--config.mesh.dta=2"],
                              "the config has no such field: 'mesh.dta'; did you mean "
                              "'mesh.data'?"),
    "accepting_no_field": ([HYBRID4, "--accept_changes=momentum,learning_rate"],
                           "--accept_changes: the config has no such field: 'learning_rate'; "
                           "did you mean 'base_learning_rate'?"),
    "cpu_devices_too_few": ([f"--config={ROOT}/configs/owt8.py", "--cpu_devices=4"],
                            "the 2×4 mesh needs 8 devices, but --cpu_devices=4 simulates 4 CPU "
                            "devices: set --cpu_devices=8 (or leave it out: the CPU then "
                            "simulates what the mesh needs), or choose a mesh that fits 4 "
                            "devices: --config.mesh.data=1 --config.mesh.model=4."),
    "missing_config_file": (["--config=configs/no_such_config.py"],
                            "the config file could not be loaded"),
    "batch_not_divisible": ([DATA4, "--config.global_batch_size=255"],
                           "global_batch_size 255 cannot be split evenly over the 4 devices"),
    "microbatches_not_dividing": ([DATA4, "--config.microbatches=3"],
                                  "each device's 64 examples cannot be split into 3 "
                                  "microbatches"),
    "eval_batch_not_divisible": ([DATA4, "--config.eval_batch_size=121"],
                                 "eval_batch_size 121 cannot be split evenly over the 4 devices"),
    "layer_cannot_split": ([MODEL2, "--config.mesh.model=4"],
                           "alexnet layer conv1 normalises (LRN) within each column"),
    "image_too_small": ([HYBRID4, "--config.image_size=32"],
                        "image_size 32 is too small for alexnet"),
    "scheme_needs_other_mesh": ([HYBRID4, "--config.parallelism=data"],
                                "parallelism 'data' needs mesh.model = 1, got a 2×2 mesh."),
    "backend_cannot_run_scheme": ([HYBRID4, "--config.backend=pmap"],
                                  "backend 'pmap' runs the schemes single, data; parallelism "
                                  "'hybrid' needs the explicit backend."),
    "gspmd_with_ring": ([DATA4, "--config.backend=gspmd", "--config.grad_reduce=ring"],
                        "backend 'gspmd' lets XLA place the gradient sum; grad_reduce 'ring' "
                        "needs the explicit backend."),
    "butterfly_on_three": ([DATA4, "--config.mesh.data=3", "--config.global_batch_size=255",
                            "--config.eval_batch_size=120", "--config.grad_reduce=butterfly"],
                           "grad_reduce 'butterfly' needs power-of-two mesh axes, but mesh.data "
                           "is 3"),
    "averaging_batch_norm": ([AVERAGING4, "--config.model=alexnet_bn"],
                             "parallelism 'averaging' keeps no batch-norm statistics"),
    "asgd_resnet": ([DATA4, "--config.parallelism=asgd", "--config.model=resnet50"],
                    "parallelism 'asgd' keeps no batch-norm statistics; train a model with batch "
                    "norm with a synchronous scheme (single, data, model, hybrid, owt)."),
    "resnet_filters_over_three": ([MODEL2, "--config.model=resnet50_cifar",
                                   "--config.mesh.model=3", "--config.global_batch_size=30",
                                   "--config.eval_batch_size=30"],
                                  "resnet50_cifar layer conv1 has 16 filters, which a model axis "
                                  "of size 3 cannot split evenly."),
    "averaging_sync_zero": ([AVERAGING4, "--config.sync_every=0"],
                            "sync_every must be at least 1, got 0."),
    "asgd_push_zero": ([DATA4, "--config.parallelism=asgd", "--config.n_push=0"],
                       "n_push must be at least 1, got 0."),
    "ten_crops_on_digits": ([HYBRID4, "--config.eval_crops=10"],
                            "eval_crops = 10 is ImageNet-style evaluation; dataset 'digits'"),
    "shards_not_dividing_batch": ([HYBRID4, "--config.dataset=cifar10",
                                   "--config.input_shards=3"],
                                  "global_batch_size 256 cannot be cut into 3 input shards"),
    # Refused with the config, before the set is opened (it need not exist) or a step compiled.
    "split_without_data_axis": ([MODEL2, "--config.dataset=decoded:/no/decoded/set",
                                 "--config.decoded_placement=split"],
                                "decoded_placement 'split' shares the set's rows over the mesh's "
                                "data axis, and this mesh has 1 data shard"),
    "workdir_is_a_file": ([HYBRID4, "--workdir={file}"], "is a file, not a directory."),
    # Root (Colab, Docker) passes os.access for any directory: whether one can be made is tried.
    "workdir_cannot_be_made": ([HYBRID4, "--workdir=/proc/hybrid_parallel_run"],
                               "--workdir '/proc/hybrid_parallel_run' cannot be created: '/proc' "
                               "is not a writable directory."),
    "cpu_devices_zero": ([HYBRID4, "--cpu_devices=0"], "--cpu_devices must be at least 1, got 0."),
    "coordinator_alone": ([HYBRID4, "--coordinator_address=127.0.0.1:1234"],
                          "--coordinator_address needs --num_processes and --process_id too."),
    "process_id_out_of_range": ([HYBRID4, "--coordinator_address=127.0.0.1:1234",
                                 "--num_processes=2", "--process_id=2"],
                                "--process_id must lie in [0, 1] for --num_processes 2, got 2."),
    "mesh_over_processes": ([HYBRID4, "--coordinator_address=127.0.0.1:1234",
                             "--num_processes=3", "--process_id=0"],
                            "the 2×2 mesh cannot be split evenly over 3 processes."),
    "distributed_twice": ([HYBRID4, "--distributed", "--coordinator_address=127.0.0.1:1234",
                           "--num_processes=2", "--process_id=0"],
                          "--distributed reads the processes from the environment"),
}


class BadInputTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    # A finished hybrid 2×2 run: every check must come before anything looks at it.
    cls.workdir = tempfile.mkdtemp()
    train.train_config(testing.tiny_config(
        parallelism="hybrid", mesh=dict(data=2, model=2), global_batch_size=16,
        num_train_steps=2, eval_batch_size=120, checkpoint_every_steps=1, log_every_steps=1),
        cls.workdir)
    cls.before = testing.digest(cls.workdir)
    cls.file = os.path.join(tempfile.mkdtemp(), "a_file")
    with open(cls.file, "w") as f:
      f.write("not a directory\n")

  @parameterized.named_parameters(*((name, *case) for name, case in BAD.items()))
  def test_one_sentence_exit_1_and_the_workdir_untouched(self, args, message):
    args = [a.format(file=self.file) for a in args]
    if not any(a.startswith("--workdir") for a in args):
      args.append(f"--workdir={self.workdir}")
    code, stderr = testing.main_in_process(args)
    self.assertEqual(code, 1, stderr)
    lines = stderr.strip().splitlines()
    self.assertLen(lines, 1, stderr)
    self.assertTrue(lines[0].startswith("error: "), stderr)
    self.assertIn(message, lines[0])
    self.assertNotIn("Traceback", stderr)
    self.assertEqual(testing.digest(self.workdir), self.before)

  def test_at_least_thirty_kinds_of_bad_input(self):
    self.assertGreaterEqual(len(BAD), 30)


class FieldsTest(absltest.TestCase):

  def test_the_defaults_set_exactly_the_declared_fields(self):
    declared = experiment.SETTINGS
    self.assertEqual(set(validation.fields(default.get_config(), declared)), set(declared))
    # Each declared once: no config field read into two parts of the run.
    self.assertLen(declared, sum(len(checks.declared_settings(part))
                                 for part in experiment.PARTS))

  def test_every_declared_field_refuses_a_value_of_no_kind_it_takes(self):
    # Each field's own check, named in one sentence (a check that accepted anything would pass
    # resolve with it): the kinds of settings no scheme's BAD case above reaches are here too.
    for field, check in experiment.SETTINGS.items():
      with self.subTest(field):
        with self.assertRaisesRegex(UserError, re.escape(field)):
          check(field, object())

  def test_a_config_missing_a_field_is_refused_by_name(self):
    config = default.get_config()
    del config["warmup"]
    with self.assertRaisesRegex(UserError, "the config has no field 'warmup'; start it from "
                                "configs/default.py's get_config"):
      experiment.resolve(config)

  def test_the_run_holds_the_configs_values(self):
    config = default.get_config()
    config.update(parallelism="owt", grad_reduce="ring", momentum=0.8, lr_decay_epochs=(3, 7))
    config.mesh.data, config.mesh.model = 2, 4
    run = experiment.resolve(config)
    self.assertEqual((run.plan.scheme, run.plan.data, run.plan.model), ("owt", 2, 4))
    self.assertEqual((run.step.grad_reduce, run.optimizer.momentum), ("ring", 0.8))
    self.assertEqual(run.schedule.lr_decay_epochs, (3, 7))
    self.assertEqual(run.model.name, config.model)
    with self.assertRaises(dataclasses.FrozenInstanceError):
      run.seed = 1

  def test_every_shipped_config_passes(self):
    configs = [f[:-3] for f in os.listdir(os.path.join(ROOT, "configs"))
               if f.endswith(".py") and f not in ("__init__.py", "default.py")]
    self.assertNotEmpty(configs)
    for name in configs:
      config = __import__(f"configs.{name}", fromlist=["get_config"]).get_config()
      experiment.resolve(config)

  def test_types_are_checked_too(self):
    config = default.get_config()
    with config.unlocked():
      config.mesh.data = True  # a bool is not an integer here.
    with self.assertRaisesRegex(UserError, r"mesh.data must be an integer, got True \(bool\)"):
      experiment.resolve(config)


if __name__ == "__main__":
  absltest.main()

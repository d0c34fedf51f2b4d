"""Defaults shared by every config: Krizhevsky et al. 2012's hyperparameters, digits at 64².

Not run directly; the experiment configs import it and override a few fields.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()

  # Model: a name from hybrid_parallel.models.ARCHITECTURES (alexnet, alexnet_owt, alexnet_bn,
  # resnet50, resnet50_cifar, and the *_tiny sizes).
  config.model = "alexnet"
  # Square input side. The papers use 224; 64 is the smallest AlexNet input and keeps a CPU run
  # of digits to minutes.
  config.image_size = 64
  # Dropout before each hidden FC layer (0.5 in Krizhevsky et al. 2012; the ResNets have none).
  config.dropout_rate = 0.5
  # alexnet_bn and the ResNets: batch-norm statistics over each worker's own batch (False, as Goyal et al.) or
  # over the whole batch of the layer (True).
  config.sync_batch_norm = False
  # Compute dtype of convolutions, matmuls and activations: float32 or bfloat16 (mixed precision:
  # parameters, gradients, optimiser state, normalisation statistics and logits stay float32);
  # float64 (every value, with JAX_ENABLE_X64=1, on a CPU) is the exact reference the tests
  # measure float32 rounding against (tests/numerics.py).
  config.dtype = "float32"
  # Compile the steps with the XLA:CPU options that made them faster on a CPU (see
  # hybrid_parallel/compiler_options.py); False: XLA's defaults. No effect on GPU or TPU.
  config.tune_xla_cpu = True
  # How the max-pools are computed: argmax (an elementwise gradient written for XLA:CPU),
  # reduce_window (XLA's own gradient) or auto (what was measured fastest on the platform;
  # hybrid_parallel/layers.py). The same numbers either way.
  config.max_pool = "auto"
  # How the 11×11 / 4 stem conv is computed: direct (one strided conv), space_to_depth (a 3×3 / 1
  # conv over 4×4 blocks of pixels: cuDNN runs 3 input channels badly) or auto (what was measured
  # fastest on the platform; hybrid_parallel/layers.py). Equal up to float rounding.
  config.stem_conv = "auto"
  # How a conv connected only within its column (two-column nets, both columns on one device) is
  # computed: feature_group_count (one grouped XLA convolution), per_group (one conv per column,
  # concatenated: XLA:CPU's grouped-conv gradient is slow) or auto (what was measured fastest on
  # the platform; hybrid_parallel/layers.py). Equal up to float rounding.
  config.grouped_conv = "auto"

  # How the synchronous step is partitioned: explicit (jax.shard_map; every collective written
  # out), gspmd (the same PartitionSpecs given to jax.jit, XLA inserting the collectives) or
  # pmap (single / data only: the Flax examples' jax.pmap step); hybrid_parallel/steps/.
  config.backend = "explicit"
  # Parallelism: single, data, model, hybrid, owt, averaging or asgd (the table of
  # hybrid_parallel/partitioning.py).
  config.parallelism = "single"
  # The device mesh: batch split `data` ways, filters / neurons split `model` ways.
  config.mesh = ml_collections.ConfigDict({"data": 1, "model": 1})
  # owt only: how the FC layers run (Krizhevsky 2014; hybrid_parallel/steps/variable_batch.py):
  # a — every model device gathers its data group's conv features and runs its FC slice on the
  # whole batch; b — K passes (K = mesh.model), in pass k worker k's rows go to every worker;
  # c — K passes, each mixing a K-th of every worker's rows.
  config.owt_variant = "a"
  # b / c: 1 — one FC update per step from the gradients of all K passes (the same update as a);
  # K (= mesh.model) — an FC update after every pass: the FC layers train at batch
  # global_batch_size / K, the conv layers at global_batch_size (the "variable batch size").
  config.fc_updates_per_step = 1
  # How gradients are summed over the batch axes: psum (XLA's all-reduce), ring, tree, butterfly
  # or parameter_server (built from ppermute; see hybrid_parallel/collectives.py).
  config.grad_reduce = "psum"
  # averaging (Su, Chen & Morgan): mix the replicas' parameters every sync_every steps by
  # average_method (allreduce, ring, butterfly, hopping_ring; hybrid_parallel/local_sgd/),
  # momentum buffers too when average_momentum.
  config.sync_every = 1
  config.average_method = "allreduce"
  config.average_momentum = True
  # asgd (Paine et al. 2013): clients push their updates every n_push and fetch the server's
  # parameters every n_fetch steps (Paine et al.: both = n_sync), at staggered phases when
  # asgd_stagger; the first warm_start_steps train client 0 alone, and the clients then go on
  # with its momentum (asgd_warm_start_momentum) or from zero. The server adds the clients'
  # mean change (asgd_server_rule "average": the learning rate is the global batch's, as under
  # every scheme) or each change whole ("sum": DistBelief's and Paine's servers; each client's
  # rate is then its own, and the server takes D times the step and the weight decay);
  # Clients step at their own speeds by asgd_step_times: "equal" (lock-step), "spread", "straggler"
  # or "heavy_tailed" (step times drawn from the run's seed, lognormal of σ asgd_heavy_tail_sigma;
  # the server applies pushes in arrival order); hybrid_parallel/local_sgd/asgd.py. Staggered
  # clients' phases are spread evenly over n_push, or drawn from the seed (asgd_phases "random").
  # asgd_data_order "heavy_tailed" (or "spread", "straggler") feeds lock-step clients the images
  # a run at those step times would have fed them (an in-memory dataset); "own": their own.
  config.n_push = 1
  config.n_fetch = 1
  config.asgd_stagger = True
  config.warm_start_steps = 0
  config.asgd_warm_start_momentum = True
  config.asgd_server_rule = "average"
  config.asgd_step_times = "equal"
  config.asgd_heavy_tail_sigma = 1.0
  config.asgd_phases = "even"
  config.asgd_data_order = "own"

  # Data (see input_pipeline/): digits, synthetic or npz:PATH held in memory, or a TensorFlow
  # Datasets name — imagenet2012, imagenette/320px-v2, cifar10, cifar100, mnist, fashion_mnist —
  # read from data_dir ("" = tfds's default, ~/tensorflow_datasets), downloaded there first when
  # tfds_download and the machine is online (imagenet2012 needs its archives put there by hand).
  # Or prepared:DIR, a dataset written once by `python -m input_pipeline.prepare` (ImageNet at
  # accelerator speed: no TensorFlow, augmentation on the devices). Its images decode on a
  # thread per host core in the training process (input_workers = 0), or in that many worker
  # processes.
  config.dataset = "digits"
  config.data_dir = ""
  config.tfds_download = True
  config.input_workers = 0
  # Or decoded:DIR, a dataset decoded once (`python -m input_pipeline.prepare --format=decoded`):
  # "auto" holds it in an accelerator's memory where it fits beside the compiled step (a copy per
  # device, else each device its share over the data axis), else (and on CPUs, and on devices
  # that report no memory statistics) gathers batches from its memory-mapped file on host
  # threads; "devices" or "host" forces either, "split" the share per device even where a copy
  # would fit (docs/input_pipeline.md says which fits which machine).
  config.decoded_placement = "auto"
  # tfds datasets only. Each split is read in input_shards even shards, one slice of every batch
  # each; processes read disjoint shards, so the number of processes must divide input_shards
  # and input_shards the batch sizes. The batches are the same for any such process count.
  config.input_shards = 8
  # imagenet2012 only (the others are cached and shuffled whole): records in each shard's
  # shuffle buffer (encoded JPEGs, ~110 kB each).
  config.shuffle_buffer = 2048
  # ImageNet-style augmentation (tfds ImageNet sources and prepared:DIR): the σ of Krizhevsky's
  # PCA colour noise (0 turns it off), and evaluation on the centre crop (1) or on ten crops with
  # their softmaxes averaged (10).
  config.pca_lighting_std = 0.1
  config.eval_crops = 1
  # Images per step over all devices: 128 for a quick run; Yadan et al. use 256 in every
  # configuration, as configs/single.py … hybrid4.py do (`for_scheme` below).
  config.global_batch_size = 128
  # Gradient accumulation: each step runs this many passes over slices of the batch and applies
  # one update (the same update as the whole batch at once; synchronous schemes only).
  config.microbatches = 1
  # Images per evaluation step; the last partial batch is padded and masked.
  config.eval_batch_size = 120
  # synthetic only: how many training images to generate, and how many classes.
  config.synthetic_examples = 1024
  config.synthetic_classes = 10

  # Training length: num_epochs passes over the training set, unless num_train_steps > 0.
  config.num_epochs = 30
  config.num_train_steps = -1

  # Optimiser: sgd — SGD with momentum 0.9 and weight decay 5e-4 on the weights (Krizhevsky et
  # al.) — or lars: the same with each layer's step scaled by its trust ratio
  # lars_trust_coefficient·‖w‖/(‖∇L + wd·w‖ + lars_eps) (You et al. 2017; hybrid_parallel/optim.py).
  config.optimizer = "sgd"
  config.lars_trust_coefficient = 0.001
  config.lars_eps = 0.0
  config.momentum = 0.9
  config.nesterov = False  # Nesterov momentum instead of heavy ball.
  config.weight_decay = 5e-4
  # LR 0.01 for a batch of 128 (Krizhevsky 2014's single-GPU rule); scaled for other batch sizes
  # by lr_scaling: none, linear (lr × batch / reference; Goyal et al. 2017) or sqrt.
  config.base_learning_rate = 0.01
  config.reference_batch_size = 128
  config.lr_scaling = "linear"
  # Warmup over warmup_epochs: gradual (linear from base_learning_rate to the scaled rate, Goyal
  # et al.) or constant (base_learning_rate, then the scaled rate).
  config.warmup_epochs = 0.0
  config.warmup = "gradual"
  # Learning-rate multipliers of the conv layers (with their batch norms) and of the FC layers;
  # Krizhevsky 2014's hybrid: conv × number of workers, FC × 1.
  config.lr_multipliers = ml_collections.ConfigDict({"conv": 1.0, "fc": 1.0})
  # After warmup: step (× lr_decay_factor at each of lr_decay_epochs), cosine or constant.
  config.lr_decay = "step"
  config.lr_decay_factor = 0.1
  config.lr_decay_epochs = (20,)

  # Faults (hybrid_parallel/checkpointing.py, faults.py). A checkpoint every this many steps (and
  # at the end and on SIGTERM) in <workdir>/checkpoints, the last checkpoint_keep kept; a run
  # resumes from the newest one automatically.
  config.checkpoint_every_steps = 100
  config.checkpoint_keep = 3
  # A step with NaN/Inf loss or gradients stops the run (False) or is skipped (True).
  config.skip_nonfinite_steps = False
  # End the run with a message if no step finishes for this long (a dead peer process); 0: never.
  config.step_timeout_s = 600.0

  # Bookkeeping.
  config.seed = 0  # Parameters, data order and dropout all derive from it.
  config.log_every_steps = 10  # A train row in metrics.jsonl and a console line.
  config.eval_every_steps = 50  # An eval row over the whole test set (and always at the end).
  # After every step, the loss and top-1 of the evaluated model (A-SGD: the server's) on the first
  # this many training images, as a `probe_loss` / `probe_top1` row: a training curve without minibatch noise, step
  # by step (in-memory datasets; one forward pass of them a step); 0: none.
  config.probe_examples = 0
  # Trace this many steps (after the first, which compiles) with jax.profiler into
  # <workdir>/profile, for TensorBoard's profile plugin or Perfetto; 0: no trace.
  config.profile_steps = 0
  return config


def for_scheme(parallelism: str, data: int, model: int, *,
               global_batch_size: int = 256) -> ml_collections.ConfigDict:
  """The defaults with `parallelism` on a `data × model` mesh (Yadan et al. use batch 256)."""
  config = get_config()
  config.parallelism = parallelism
  config.mesh.data, config.mesh.model = data, model
  config.global_batch_size = global_batch_size
  return config

"""How fast: the training step on this CPU (throughput, pytorch_reference, layer_choices), the
input pipeline, a GPU machine (accelerator), and every scheme compiled for TPU and GPU topologies
without one (tpu_compile, gpu_compile, with the topologies they describe)."""

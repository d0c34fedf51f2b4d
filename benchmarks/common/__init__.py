"""Helpers several studies share: timing a compiled step (step_timing), training runs of main.py
(main_runs), compile-only programs for TPU and GPU topologies (compile_only), PyTorch's AlexNet
(torch_alexnet), the --config / --all flags (config_or_all)."""

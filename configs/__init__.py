"""Experiment configs: default.py and one file per experiment (its docstring: the command and the
measured result). `python main.py --config=configs/NAME.py`."""

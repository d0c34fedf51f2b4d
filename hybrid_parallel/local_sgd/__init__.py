"""Local SGD: replicas with their own parameters (core), mixed by model averaging or a parameter
server (averaging, asgd)."""

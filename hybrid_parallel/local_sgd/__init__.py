"""Local SGD: replicas with their own parameters (core), mixed by model averaging or a parameter
server (averaging, asgd).

`SCHEMES` is the registry of the local-SGD schemes (partitioning.SCHEMES marks them
`local_sgd`): each module declares its config fields (`Settings`), what it refuses (`check`) and
how its replicas meet (`make_sync`)."""

from hybrid_parallel.local_sgd import asgd, averaging

SCHEMES = {"averaging": averaging, "asgd": asgd}

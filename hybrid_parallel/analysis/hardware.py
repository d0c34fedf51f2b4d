"""The machines the time model (costmodel.step_time) describes: devices and links from their
datasheets and the papers' text, each value with its source, and the machines built from them.

A `Machine` also says how its implementation moved data, where the 2013–2014 papers' code did it
differently from today's XLA: copies staged through host memory, parameters sent back as well as
gradients, devices sharing one uplink. Its one calibrated constant, `efficiency`, comes from its
own one-device time (`Machine.calibrated`), never from the multi-device times it is checked
against.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Link:
  """An interconnect in the α-β-γ model (Thakur, Rabenseifner & Gropp 2005)."""
  name: str
  alpha: float  # seconds per message
  beta: float  # seconds per byte sent, per direction
  gamma: float = 0.0  # seconds per byte reduced
  source: str = ""


@dataclasses.dataclass(frozen=True)
class Device:
  """An accelerator: its dense peak FLOP/s by compute dtype, and its memory."""
  name: str
  peak_flops: dict  # dtype → FLOP/s
  memory_bytes: float
  source: str


@dataclasses.dataclass(frozen=True)
class Machine:
  """Devices, their links, and how the implementation that ran on them moved data.

  Attributes:
    devices_per_node: devices that share a node's `node_link`.
    nodes: nodes joined by `network`.
    host_staged: each device-to-device copy goes to host memory and back (two crossings of the
      PCIe link, one after the other), as in 2013-era CUDA code without peer-to-peer copies.
    sends_parameters: data parallelism as Yadan et al. built it — each device sends its
      gradients to the host, which sums them and applies the update, and the host sends the
      parameters back to every device ("both gradients and parameter values on every update step").
    devices_per_uplink: devices behind one host link (a PCIe switch): their transfers to the host
      share its bandwidth.
    host_memory: the host's memory in the γ term of a host-side sum.
    efficiency: the calibrated fraction of `device`'s peak a step's FLOPs run at; 1 until
      `calibrated`.
    step_overhead_s: the fixed time of a step beyond its FLOPs (launching its kernels, its small
      operations): why a small batch uses a device less well.
  """
  name: str
  device: Device
  devices_per_node: int
  node_link: Link
  network: Link | None = None
  nodes: int = 1
  host_staged: bool = False
  sends_parameters: bool = False
  devices_per_uplink: int = 1
  host_memory: Link | None = None
  efficiency: float = 1.0
  step_overhead_s: float = 0.0
  calibrated_from: str = ""

  @property
  def devices(self) -> int:
    return self.devices_per_node * self.nodes

  def calibrated(self, *, flops_per_step: float, seconds_per_step: float, dtype: str,
                 source: str) -> "Machine":
    """This machine with `efficiency` set so that one device's step of `flops_per_step` takes
    `seconds_per_step` (its only calibrated constant)."""
    compute_s = seconds_per_step - self.step_overhead_s
    efficiency = flops_per_step / (compute_s * self.device.peak_flops[dtype])
    return dataclasses.replace(self, efficiency=efficiency, calibrated_from=source)


# --- Devices --------------------------------------------------------------------------------------

TITAN = Device("NVIDIA GTX TITAN (2013)", {"float32": 4.5e12}, 6e9,
               "NVIDIA's GTX TITAN specifications: 4.5 TFLOP/s single precision, 6 GB")
K20 = Device("NVIDIA Tesla K20 (2012)", {"float32": 3.52e12}, 5e9,
             "NVIDIA's Tesla K20 datasheet: 3.52 TFLOP/s single precision, 5 GB")
K20X = Device("NVIDIA Tesla K20X (2012)", {"float32": 3.95e12}, 6e9,
              "NVIDIA's Tesla K20X datasheet: 3.95 TFLOP/s single precision, 6 GB")
# float32 is charged at the TF32 tensor-core peak: XLA's default precision lets cuDNN and cuBLAS
# run float32 convolutions and matmuls in TF32 on Hopper.
H100 = Device("NVIDIA H100 SXM", {"bfloat16": 989e12, "float32": 495e12}, 84_942_979_072,
              "NVIDIA's H100 datasheet: 989 TFLOP/s dense bf16, 495 TF32; 80 GB HBM3 "
              "(84,942,979,072 B as XLA's h100_sxm spec records the driver's figure)")
H200 = Device("NVIDIA H200", {"bfloat16": 989e12, "float32": 495e12}, 143_771 * 2**20,
              "NVIDIA's H200 datasheet: the H100's arithmetic, 141 GB HBM3e (the lent H200 "
              "reported 143,771 MiB, docs/gpu.json)")
DEVICES = {"titan": TITAN, "k20": K20, "k20x": K20X, "h100": H100, "h200": H200}

# --- Links ----------------------------------------------------------------------------------------

PCIE3 = Link("PCIe 3.0 x16", alpha=10e-6, beta=1 / 12e9,
             source="PCIe 3.0 x16: ≈ 12 GB/s per direction in practice (of 15.75 GB/s); ≈ 10 µs "
                    "per cudaMemcpy")
PCIE2 = Link("PCIe 2.0 x16", alpha=10e-6, beta=1 / 6e9,
             source="PCIe 2.0 x16: ≈ 6 GB/s per direction in practice (of 8 GB/s, NVIDIA's "
                    "'How to optimize data transfers in CUDA C/C++', 2012)")
# Host memory of a 2013 dual-socket Xeon E5 (Sandy Bridge-EP): 4 channels of DDR3-1600 per socket,
# 51.2 GB/s (Intel's datasheet); a sum of n bytes from each of p devices touches (p + 1)·n.
HOST_DDR3 = Link("DDR3-1600 × 4 channels", alpha=0.0, beta=0.0, gamma=1 / 51.2e9,
                 source="Intel Xeon E5-2600 datasheet: 51.2 GB/s per socket")
# NVLink 4 through NVSwitch, 8 GPUs: ≈ 370 GB/s of all-reduce bus bandwidth (nccl-tests on DGX
# H100, NVIDIA's figures); latency left out (it is microseconds against milliseconds of step).
NVLINK4 = Link("NVLink 4 (8 GPUs, NVSwitch)", alpha=0.0, beta=1 / 370e9,
               source="nccl-tests on DGX H100: ≈ 370 GB/s all-reduce bus bandwidth")
# One 400 Gb/s ConnectX-7 NIC per GPU in DGX H100 / H200 nodes.
NDR400 = Link("InfiniBand NDR 400 Gb/s per GPU", alpha=0.0, beta=1 / 50e9,
              source="DGX H100/H200: one 400 Gb/s ConnectX-7 NIC per GPU, 50 GB/s")
# FireCaffe's cluster network (the scaling curves).
FDR = Link("InfiniBand FDR", alpha=5e-6, beta=1 / 6e9, gamma=1 / 100e9,
           source="InfiniBand FDR 4x: ≈ 6 GB/s, ≈ 5 µs (FireCaffe's Cray/InfiniBand cluster); "
                  "the sum at 100 GB/s is an assumption (a GPU's reduction, far from the "
                  "bottleneck), not a sourced figure")
# Blue Waters' Cray Gemini network between the XK7 nodes of Paine et al. (one K20X per node, its
# PCIe 2.0 link to the host's AMD Opteron).
GEMINI = Link("Cray Gemini", alpha=1.5e-6, beta=1 / 6e9,
              source="Cray Gemini: ≈ 6 GB/s injection per node, ≈ 1.5 µs MPI latency")


def paper_machines() -> dict[str, Machine]:
  """The papers' machines, uncalibrated (each paper's one-device time calibrates its own)."""
  return {
      # Yadan et al. 2013: four TITANs in one server; each GPU on its own x16 link (four
      # double-width GPUs on two sockets' root ports), copies staged through the host,
      # parameters sent back after the host's update.
      "yadan2013": Machine("4 TITANs, one server (Yadan et al. 2013)", TITAN,
                           devices_per_node=4, node_link=PCIE3, host_staged=True,
                           sends_parameters=True, host_memory=HOST_DDR3),
      # Krizhevsky 2014: eight K20s in one machine, two behind each PCIe switch (two sockets
      # offer 80 lanes: four x16 uplinks); cuda-convnet2 copies peer to peer, not via the host.
      "krizhevsky2014": Machine("8 K20s, one machine (Krizhevsky 2014)", K20,
                                devices_per_node=8, node_link=PCIE3, devices_per_uplink=2),
      # Paine et al. 2013: one K20X per Blue Waters XK7 node, Gemini between the nodes; clients
      # copy parameters to the host (PCIe 2.0) and talk MPI to a server on another node.
      "paine2013": Machine("K20X nodes of Blue Waters (Paine et al. 2013)", K20X,
                           devices_per_node=1, nodes=32, node_link=PCIE2, network=GEMINI,
                           host_staged=True),
  }


def gpu_node(device: str, *, gpus_per_node: int = 8, nodes: int = 1,
             network_bytes_per_s: float | None = None) -> Machine:
  """Nodes of `gpus_per_node` H100s or H200s on NVLink, joined by one NIC per GPU (400 Gb/s
  unless `network_bytes_per_s` says otherwise); uncalibrated."""
  network = NDR400 if network_bytes_per_s is None else Link(
      f"{network_bytes_per_s / 1e9:g} GB/s per GPU", alpha=0.0, beta=1 / network_bytes_per_s,
      source="as described")
  return Machine(f"{nodes} × {gpus_per_node} {DEVICES[device].name}", DEVICES[device],
                 devices_per_node=gpus_per_node, nodes=nodes, node_link=NVLINK4,
                 network=network if nodes > 1 else None)

"""The machines the time model (costmodel.step_time) describes: devices and links from their
datasheets and the papers' text, each value with its source, and the machines built from them.

A `Machine` also says how its implementation moved data, where the 2013–2014 papers' code did it
differently from today's XLA: copies staged through host memory, parameters sent back as well as
gradients, devices sharing one uplink, two halves under two CPUs — and, for the papers' codes, how
fast their convolution kernels run at a device's batch (`ConvKernels`, from published per-batch
timings). Its one calibrated constant, `efficiency`, comes from its own one-device time
(`Machine.calibrated`), never from the multi-device times it is checked against.
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
class ConvKernels:
  """A convolution code's per-image rate at a device's batch, relative to its rate at 128 images,
  from published timings of the code at batches of 32, 64 and 128.

  cuda-convnet and cuda-convnet2 choose their kernels by what divides the batch, not by its size
  (`filter_acts.cu` in both: `imgsPerThread = numImages % 128 == 0 ? 4 : numImages % 64 == 0 ? 2 :
  1`; "all of these convolution routines are optimized for the case when the number of images (i.e.
  the minibatch size) is a multiple of 128. Other batch sizes will work, but I made no attempt
  whatsoever to make them work fast"). So the rate is a step over those three kernel families, each
  measured once: a multiple of 128 runs at 128's rate, another multiple of 64 at 64's, any other
  batch at 32's. Outside the measured batches this is an extrapolation, said where it is used: above
  128 the 128-image kernels tile the batch 128 images to a block (more images, more blocks, the
  same work per image), so 256 or 1024 is taken at 128's rate; a batch that is a multiple of neither
  64 nor 128 other than 32 (96, 16) runs the one-image-per-thread kernels measured at 32, at 32's
  rate (a smaller batch, with fewer blocks, would be slower still).

  Attributes:
    rate_by_batch: {32: r, 64: r, 128: 1.0} — images per second at that batch ÷ images per second
      at 128 (derived from `measured` by `relative_rates`).
    measured: what the source published, by batch (kept so that tests hold them to the source).
  """
  name: str
  rate_by_batch: dict
  measured: dict
  source: str

  def rate(self, batch: float) -> float:
    """This code's per-image rate at a device's `batch`, relative to 128 images (class docstring)."""
    batch = int(batch)
    if batch % 128 == 0:
      return self.rate_by_batch[128]
    if batch % 64 == 0:
      return self.rate_by_batch[64]
    return self.rate_by_batch[32]


def relative_rates(seconds_by_batch: dict) -> dict:
  """{batch: images/s at batch ÷ images/s at 128} from {batch: seconds per call at that batch}."""
  per_image = {b: seconds / b for b, seconds in seconds_by_batch.items()}
  return {b: per_image[128] / per_image[b] for b in per_image}


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
    devices_per_uplink: devices behind one host link (a PCIe switch): their transfers through the
      host share its bandwidth (peer-to-peer copies under one switch do not cross it).
    devices_per_socket: devices under one CPU, where a node has two halves (None: one). A group of
      more devices spans both halves: its collectives run at the rate of the link between them. A
      group of at most this many is taken to sit under one CPU (the papers' 1 × K meshes).
    cross_socket_staged: copies between the halves go through host memory: two copies one after
      the other (GPU → host, host → GPU), each through its half's shared uplink.
    host_memory: the host's memory in the γ term of a host-side sum.
    conv_kernels: the code's convolution rate against a device's batch (`ConvKernels`); None where
      the kernels' rate does not depend on the batch beyond what `step_overhead_s` says.
    efficiency: the calibrated fraction of `device`'s peak a step's FLOPs run at (at 128 images
      per device where `conv_kernels` is given); 1 until `calibrated`.
    step_overhead_s: the fixed time of a step beyond its FLOPs (launching its kernels, its small
      operations): why a small batch uses a modern device less well (measured: docs/gpu.json).
    layout_source: where the way it moved data comes from (the paper's words).
    switch_groups: the devices behind each level of PCIe switch, innermost first, where peer-to-
      peer copies between two groups cross the one x16 link above the smaller group (a K80
      board's two GPUs behind its on-board switch: (2, ...)); () where every device has its own
      link. What a collective pays for it depends on its pattern (`costmodel.kvstore_device_time`:
      every device sends to every other).
    network_per_node: one network card per node, shared by its devices (Goyal et al.'s servers): a
      collective across nodes sums within each node on `node_link`, runs across the nodes among
      one device per node, then broadcasts within each node; False: one card per device.
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
  devices_per_socket: int | None = None
  cross_socket_staged: bool = False
  host_memory: Link | None = None
  conv_kernels: ConvKernels | None = None
  efficiency: float = 1.0
  step_overhead_s: float = 0.0
  calibrated_from: str = ""
  layout_source: str = ""
  switch_groups: tuple[int, ...] = ()
  network_per_node: bool = False

  @property
  def devices(self) -> int:
    return self.devices_per_node * self.nodes

  def conv_rate(self, batch: float) -> float:
    """The convolutions' per-image rate at a device's `batch`, relative to the calibrated one."""
    return self.conv_kernels.rate(batch) if self.conv_kernels else 1.0

  def link_between(self, devices: int) -> Link:
    """The link a collective over a group of `devices` of one node runs at: the slowest it
    crosses. Staged through the host (`host_staged`): each copy crosses the PCIe link twice, one
    after the other, and the devices behind one uplink share it. Spanning the two halves
    (`devices_per_socket`, `cross_socket_staged`): two copies one after the other (the latency
    of one more copy) through each half's shared uplink; the two crossings of a chunk overlap
    (cuda-convnet2 pipelines them: `reducepipeline.cu`, `copypipeline.cu`)."""
    link, share = self.node_link, min(self.devices_per_uplink, devices)
    if self.host_staged:
      return Link(link.name + ", staged through the host", alpha=2 * link.alpha,
                  beta=2 * share * link.beta, gamma=link.gamma, source=link.source)
    if (self.cross_socket_staged and self.devices_per_socket
        and devices > self.devices_per_socket):
      return Link(link.name + ", between the halves through host memory", alpha=2 * link.alpha,
                  beta=share * link.beta, gamma=link.gamma, source=link.source)
    return link

  def calibrated(self, *, flops_per_step: float, seconds_per_step: float, dtype: str,
                 source: str, conv_flops_per_step: float = 0.0,
                 batch: int | None = None) -> "Machine":
    """This machine with `efficiency` set so that one device's step of `flops_per_step` takes
    `seconds_per_step` (its only calibrated constant); of them `conv_flops_per_step` run at the
    convolutions' rate at `batch` (`conv_kernels`)."""
    compute_s = seconds_per_step - self.step_overhead_s
    conv_rate = self.conv_rate(batch) if batch else 1.0
    effective = flops_per_step - conv_flops_per_step + conv_flops_per_step / conv_rate
    efficiency = effective / (compute_s * self.device.peak_flops[dtype])
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
              "NVIDIA's H200 datasheet: the H100's arithmetic, 141 GB HBM3e (the measured H200 "
              "reported 143,771 MiB, docs/gpu.json)")
DEVICES = {"titan": TITAN, "k20": K20, "k20x": K20X, "h100": H100, "h200": H200}

# The GPUs users rent beside the H100 and H200: dense peaks from NVIDIA's datasheets (without
# sparsity), float32 charged at the TF32 tensor-core peak where the GPU has one (as the H100's);
# memory as XLA's target-config spec of the GPU records the driver's figure, or the datasheet's.
A100_40GB = Device("NVIDIA A100 SXM 40GB", {"bfloat16": 312e12, "float32": 156e12},
                   42_331_013_120,
                   "NVIDIA's A100 datasheet: 312 TFLOP/s dense bf16, 156 TF32; 40 GB HBM2 "
                   "(42,331,013,120 B as XLA's a100_sxm_40 spec records the driver's figure)")
A100_80GB = Device("NVIDIA A100 SXM 80GB", {"bfloat16": 312e12, "float32": 156e12},
                   85_100_068_864,
                   "NVIDIA's A100 datasheet: 312 TFLOP/s dense bf16, 156 TF32; 80 GB HBM2e "
                   "(85,100,068,864 B as XLA's a100_sxm_80 spec records the driver's figure)")
L4 = Device("NVIDIA L4", {"bfloat16": 121e12, "float32": 60e12}, 24e9,
            "NVIDIA's L4 datasheet: 242 TFLOP/s bf16 and 120 TF32 with sparsity, so 121 and 60 "
            "dense; 24 GB GDDR6 (the datasheet's 24·10⁹ B: the driver's figure is not recorded "
            "here)")
# Volta has neither TF32 nor bfloat16 tensor cores: both dtypes at the float32 peak (a bfloat16
# matmul or convolution is computed in float32 there).
V100 = Device("NVIDIA V100 SXM2 16GB", {"bfloat16": 15.7e12, "float32": 15.7e12},
              16_935_682_048,
              "NVIDIA's V100 datasheet: 15.7 TFLOP/s float32 (SXM2), no TF32 or bfloat16 units; "
              "16 GB HBM2 (16,935,682,048 B as XLA's v100 spec records the driver's figure)")
DEVICES.update({"a100": A100_80GB, "a100_40gb": A100_40GB, "l4": L4, "v100": V100})

# --- Links ----------------------------------------------------------------------------------------

PCIE3 = Link("PCIe 3.0 x16", alpha=10e-6, beta=1 / 12e9,
             source="PCIe 3.0 x16: ≈ 12 GB/s per direction in practice (of 15.75 GB/s); ≈ 10 µs "
                    "per cudaMemcpy")
PCIE2 = Link("PCIe 2.0 x16", alpha=10e-6, beta=1 / 6e9,
             source="PCIe 2.0 x16: ≈ 6 GB/s per direction in practice (of 8 GB/s, NVIDIA's "
                    "'How to optimize data transfers in CUDA C/C++', 2012)")
# Krizhevsky 2014 (arXiv:1404.5997v2, §5): "Each CPU provides two PCI-Express 2.0 lanes for four
# GPUs"; GPUs under one CPU communicate "at the full PCI-Express 2.0 rate (about 6GB/sec) through a
# PCI-Express switch". The latency per copy is not given: PCIE2's 10 µs.
PCIE2_SWITCH = Link("PCIe 2.0 through a PCIe switch", alpha=PCIE2.alpha, beta=1 / 6e9,
                    source="Krizhevsky 2014 (arXiv:1404.5997v2) §5: GPUs under one CPU talk 'at "
                           "the full PCI-Express 2.0 rate (about 6GB/sec) through a PCI-Express "
                           "switch'; 10 µs per copy as PCIe 2.0 x16")
# Host memory of a 2013 dual-socket Xeon E5 (Sandy Bridge-EP): 4 channels of DDR3-1600 per socket,
# 51.2 GB/s (Intel's datasheet); a sum of n bytes from each of p devices touches (p + 1)·n.
HOST_DDR3 = Link("DDR3-1600 × 4 channels", alpha=0.0, beta=0.0, gamma=1 / 51.2e9,
                 source="Intel Xeon E5-2600 datasheet: 51.2 GB/s per socket")
# NVLink 4 through NVSwitch, 8 GPUs: ≈ 370 GB/s of all-reduce bus bandwidth (nccl-tests on DGX
# H100, NVIDIA's figures); latency left out (it is microseconds against milliseconds of step).
NVLINK4 = Link("NVLink 4 (8 GPUs, NVSwitch)", alpha=0.0, beta=1 / 370e9,
               source="nccl-tests on DGX H100: ≈ 370 GB/s all-reduce bus bandwidth")
# The older NVLinks and PCIe: their all-reduce bus bandwidth is not measured here, so each is its
# rating per direction times the share NVLINK4 reaches of its own (370 of 450 GB/s per direction)
# or PCIE3 of its own (12 of 15.75 GB/s): an assumption, said beside each.
_NVLINK_SHARE = 370 / 450
_PCIE_SHARE = 12 / 15.75
NVLINK3 = Link("NVLink 3 (8 GPUs, NVSwitch)", alpha=0.0, beta=1 / (_NVLINK_SHARE * 300e9),
               source="NVIDIA's A100 datasheet: NVLink 600 GB/s, 300 per direction; × 370/450, "
                      "the share the H100 node's all-reduce reaches (assumed, not measured)")
NVLINK2 = Link("NVLink 2 (8 GPUs, hybrid cube-mesh)", alpha=0.0, beta=1 / (_NVLINK_SHARE * 150e9),
               source="NVIDIA's V100 datasheet: NVLink 300 GB/s, 150 per direction; × 370/450, "
                      "the share the H100 node's all-reduce reaches (assumed, not measured)")
PCIE4 = Link("PCIe 4.0 x16 (no NVLink)", alpha=10e-6, beta=1 / (_PCIE_SHARE * 31.5e9),
             source="PCIe 4.0 x16: 31.5 GB/s per direction (PCI-SIG); × 12/15.75, PCIE3's share "
                    "in practice (assumed); 10 µs per copy as PCIe 3.0. The L4 has no NVLink")
# How each GPU's node joins its GPUs (an 8-GPU HGX / DGX board; the L4's servers have none).
NODE_LINKS = {"h100": NVLINK4, "h200": NVLINK4, "a100": NVLINK3, "a100_40gb": NVLINK3,
              "l4": PCIE4, "v100": NVLINK2}
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


# --- The papers' codes: convolution rate against a device's batch ---------------------------------

# cuda-convnet (Krizhevsky et al. 2012's code; Yadan et al.'s and Paine et al.'s): Mathieu, Henaff &
# LeCun, "Fast Training of Convolutional Networks through FFTs", ICLR 2014 (arXiv:1312.5851v5), §3
# and Figure 3, bottom panel ("Time (seconds) versus batchSize, kernelSize=7, inputSize=32,
# nInputPlanes=96, nOutputPlanes=256"; "CudaConv"; "All experiments were performed on the same
# GeForce GTX Titan GPU"): seconds per call of the forward pass, the gradient with respect to the
# input and the gradient with respect to the filters, read from the figure's vector data (the §3
# table at 128: 221 / 261 / 403 ms). Each pass does the same FLOPs, so the three summed weigh them
# as a training step does: per image at 64, 0.88 of 128's rate; at 32, 0.61.
MATHIEU2014_CUDACONV_TITAN_S = {  # batch: (forward, ∂input, ∂filters) seconds
    32: (0.1157, 0.1310, 0.1123),
    64: (0.1282, 0.1627, 0.2074),
    128: (0.2116, 0.2616, 0.4040),
}
CUDA_CONVNET = ConvKernels(
    "cuda-convnet (GTX TITAN)",
    relative_rates({b: sum(passes) for b, passes in MATHIEU2014_CUDACONV_TITAN_S.items()}),
    MATHIEU2014_CUDACONV_TITAN_S,
    "Mathieu, Henaff & LeCun 2014 (arXiv:1312.5851v5), Figure 3 bottom panel: CudaConv on a GTX "
    "Titan, 7×7 kernels, 32×32 input, 96→256 planes; forward + ∂input + ∂filters seconds per call "
    "at batch 32 / 64 / 128")
# cuda-convnet2 (Krizhevsky 2014's code): Chetlur et al., "cuDNN: Efficient Primitives for Deep
# Learning" (arXiv:1410.0759v1), Figure 2, a Tesla K40, the convolution layers' rate: "performs well
# when batch sizes are large, but poorly once batch size falls to 64 or below".
CHETLUR2014_CUDACONVNET2_K40_TFLOPS = {32: 0.51, 64: 0.75, 128: 1.57}
CUDA_CONVNET2 = ConvKernels(
    "cuda-convnet2 (Tesla K40)",
    {b: tflops / CHETLUR2014_CUDACONVNET2_K40_TFLOPS[128]
     for b, tflops in CHETLUR2014_CUDACONVNET2_K40_TFLOPS.items()},
    CHETLUR2014_CUDACONVNET2_K40_TFLOPS,
    "Chetlur et al. 2014 (arXiv:1410.0759v1), Figure 2: cuda-convnet2 on a Tesla K40, 1.57 / 0.75 "
    "/ 0.51 TFLOP/s at batch 128 / 64 / 32 (a K20 is the same GK110 processor)")


KRIZHEVSKY2014_MACHINE = (
    "Krizhevsky 2014 (arXiv:1404.5997v2) §5: 'Each CPU provides two PCI-Express 2.0 lanes for four "
    "GPUs' (two GPUs share each link to the host); under one CPU they communicate 'at the full "
    "PCI-Express 2.0 rate (about 6GB/sec) through a PCI-Express switch'; between the halves "
    "traffic goes 'through the host memory and incurs a latency penalty' (priced as two copies "
    "one after the other: twice the latency; the two crossings of each chunk overlap, as "
    "cuda-convnet2's copy and reduce pipelines run them)")


def paper_machines() -> dict[str, Machine]:
  """The papers' machines, uncalibrated (each paper's one-device time calibrates its own)."""
  return {
      # Yadan et al. 2013: four TITANs in one server; each GPU on its own x16 link (four
      # double-width GPUs on two sockets' root ports), copies staged through the host,
      # parameters sent back after the host's update; cuda-convnet's kernels (its single-GPU
      # 13.6% of the TITAN's peak is cuda-convnet's: Mathieu et al.'s layer ran at 15.8%).
      "yadan2013": Machine("4 TITANs, one server (Yadan et al. 2013)", TITAN,
                           devices_per_node=4, node_link=PCIE3, host_staged=True,
                           sends_parameters=True, host_memory=HOST_DDR3,
                           conv_kernels=CUDA_CONVNET),
      # Krizhevsky 2014 (arXiv:1404.5997v2, §5): eight K20s, two halves of four under two CPUs.
      # Within a half, peer to peer through a PCIe switch at the full PCIe 2.0 rate; "Each CPU
      # provides two PCI-Express 2.0 lanes for four GPUs": two GPUs share each link to the host;
      # between the halves, copies go "through the host memory and incurs a latency penalty".
      # cuda-convnet2's kernels.
      "krizhevsky2014": Machine("8 K20s in two halves of 4, one machine (Krizhevsky 2014)", K20,
                                devices_per_node=8, node_link=PCIE2_SWITCH, devices_per_uplink=2,
                                devices_per_socket=4, cross_socket_staged=True,
                                conv_kernels=CUDA_CONVNET2,
                                layout_source=KRIZHEVSKY2014_MACHINE),
      # Paine et al. 2013: one K20X per Blue Waters XK7 node, Gemini between the nodes; clients
      # copy parameters to the host (PCIe 2.0) and talk MPI to a server on another node;
      # cuda-convnet's kernels (its clients are cuda-convnet).
      "paine2013": Machine("K20X nodes of Blue Waters (Paine et al. 2013)", K20X,
                           devices_per_node=1, nodes=32, node_link=PCIE2, network=GEMINI,
                           host_staged=True, conv_kernels=CUDA_CONVNET),
  }


def gpu_node(device: str, *, gpus_per_node: int = 8, nodes: int = 1,
             network_bytes_per_s: float | None = None) -> Machine:
  """Nodes of `gpus_per_node` GPUs of `device` (a key of NODE_LINKS) on their node's link, joined
  by one NIC per GPU (400 Gb/s unless `network_bytes_per_s` says otherwise); uncalibrated."""
  network = NDR400 if network_bytes_per_s is None else Link(
      f"{network_bytes_per_s / 1e9:g} GB/s per GPU", alpha=0.0, beta=1 / network_bytes_per_s,
      source="as described")
  return Machine(f"{nodes} × {gpus_per_node} {DEVICES[device].name}", DEVICES[device],
                 devices_per_node=gpus_per_node, nodes=nodes, node_link=NODE_LINKS[device],
                 network=network if nodes > 1 else None)


# --- 2016–2017: BBVA's p2.8xlarge (MXNet) and Goyal et al.'s Big Basin servers (Caffe2 + Gloo) ----

# One GK210 of a Tesla K80 board is one CUDA device: AWS's p2.8xlarge counts its four boards as 8
# GPUs ("The Tesla K80 shows up as 2 gpu instances internally", tensorflow/tensorflow#5362, on a
# p2.16xlarge).
K80_GK210 = Device("NVIDIA Tesla K80, one GK210 (2014)", {"float32": 8.73e12 / 2}, 12e9,
                   "NVIDIA's Tesla K80 datasheet: 8.73 TFLOP/s single precision per board with "
                   "GPU Boost, two GK210 GPUs each of 2,496 CUDA cores, 12 GB GDDR5 and 240 GB/s")
P100_SXM2 = Device("NVIDIA Tesla P100 SXM2 (2016)", {"float32": 10.6e12}, 16e9,
                   "NVIDIA's Tesla P100 datasheet (NVLink version): 10.6 TFLOP/s single "
                   "precision, 16 GB HBM2 at 732 GB/s")

# MXNet's own measurement of its kvstore 'device' (tools/bandwidth/README.md, 2016): between two
# GPUs, 258 MB of ResNet-200 gradients reduced and broadcast in 23.2 ms, "11.1 GB/sec per gpu",
# "close to the unidirectional bandwidth, which is 13 GB/sec, reported by
# cuda/samples/1_Utilities/p2pBandwidthLatencyTest". The same README's eight GPUs (4.5 GB/s per GPU)
# check the machine's layout (benchmarks/choosing/scaling_model.py), not this rate.
MXNET_P2P_BYTES_PER_S = 258e6 / 23.2e-3
PCIE3_P2P = Link("PCIe 3.0 x16, peer to peer through PCIe switches", alpha=10e-6,
                 beta=1 / MXNET_P2P_BYTES_PER_S, gamma=3 / 240e9,
                 source="MXNet tools/bandwidth README (2016): kvstore 'device' between two GPUs, "
                        "258 MB in 23.2 ms ('11.1 GB/sec per gpu'); 10 µs per copy as PCIe 3.0 "
                        "x16; the sum at a K80 GPU's 240 GB/s, 3 bytes moved per byte summed")
# Big Basin (Goyal et al. 2017, §4: "8 NVIDIA Tesla P100 GPUs that are interconnected with NVIDIA
# NVLink"; the hybrid cube mesh of the DGX-1). A ring's neighbours share one link.
NVLINK1 = Link("NVLink 1.0 (P100), one link between ring neighbours", alpha=0.0, beta=1 / 20e9,
               gamma=3 / 732e9,
               source="NVIDIA's Tesla P100 whitepaper: four NVLinks per GPU, 20 GB/s per direction "
                      "each; a ring over one link per neighbour (NCCL may build more rings: a "
                      "lower bound on its speed); latency left out as for NVLink 4; the sum at "
                      "the P100's 732 GB/s")
# "a Mellanox ConnectX-4 50Gbit Ethernet network card" per server (Goyal et al. §4). Its latency
# per message is derived from a recalled, unverified halving/doubling-over-ring speed-up
# (GOYAL2017_HALVING_DOUBLING_SPEEDUP, costmodel.latency_from_speedup): no source gives a latency.
ETHERNET_50G = Link("50 Gbit/s Ethernet, one ConnectX-4 per server", alpha=0.0, beta=8 / 50e9,
                    source="Goyal et al. 2017 (arXiv:1706.02677) §4: each server has 'a Mellanox "
                           "ConnectX-4 50Gbit Ethernet network card', 6.25 GB/s per direction; "
                           "the sum left out (no source for where Gloo ran it)")
# On 32 servers (256 GPUs) recursive halving and doubling ran 3× as fast as the ring (bucket)
# algorithm: recalled from Goyal et al. (2017), not in this project's references: unverified. Both
# send 2(p − 1)/p·b per server, so the difference is latency.
GOYAL2017_HALVING_DOUBLING_SPEEDUP = {"servers": 32, "speedup": 3.0}

P2_LAYOUT = (
    "A K80 board's two GK210s sit behind its on-board PCIe switch (NVIDIA's K80 board "
    "specification). AWS: p2.8xlarge has 8 GPUs with 'GPU Peer to Peer', 32 vCPUs (Intel Xeon "
    "E5-2686 v4), 488 GiB. Peer to peer needs the eight GPUs under one CPU's PCIe root, whose 40 "
    "lanes give at most two x16 links: inferred, two boards (four GPUs) behind each x16 link — the "
    "layout MXNet measured on its 8-GPU machine ('it saturates the single 16x link between GPU "
    "0,1,2,3 and GPU 4,5,6,7', tools/bandwidth README); AWS does not publish it. MXNet's kvstore "
    "'device' sums each key on one GPU (keys spread evenly), peer to peer")
BIG_BASIN_LAYOUT = (
    "Goyal et al. 2017 (arXiv:1706.02677) §4: 8 P100s per server on NVLink, one 50 Gbit Ethernet "
    "card per server, Wedge100 switches; each gradient summed in three phases — within the server "
    "(NCCL), across servers (recursive halving and doubling, Gloo), back to the server's GPUs "
    "(NCCL) — while backprop goes on")


def p2_8xlarge() -> Machine:
  """BBVA's machine: an AWS p2.8xlarge, 8 GK210s on 4 K80 boards; uncalibrated."""
  return Machine("AWS p2.8xlarge: 8 GK210s on 4 K80 boards", K80_GK210, devices_per_node=8,
                 node_link=PCIE3_P2P, switch_groups=(2, 4), layout_source=P2_LAYOUT)


def big_basin(servers: int, *, network_alpha: float) -> Machine:
  """Goyal et al.'s cluster: `servers` Big Basin servers of 8 P100s; the network's latency per
  message `network_alpha` (derived: costmodel.latency_from_speedup); uncalibrated."""
  network = dataclasses.replace(
      ETHERNET_50G, alpha=network_alpha,
      source=ETHERNET_50G.source + "; α DERIVED from a 3× of recursive halving and doubling "
                                   "over the ring on 32 servers, recalled from the paper and not "
                                   "in this project's references: unverified "
                                   "(costmodel.latency_from_speedup)")
  return Machine(f"{servers} Big Basin servers of 8 P100s", P100_SXM2, devices_per_node=8,
                 nodes=servers, node_link=NVLINK1, network=network if servers > 1 else None,
                 network_per_node=True, layout_source=BIG_BASIN_LAYOUT)

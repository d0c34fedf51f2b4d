"""The HLO accounting of small known programs equals hand-computed bytes and messages."""


import jax
import jax.numpy as jnp
from absl.testing import absltest
from jax.sharding import NamedSharding, PartitionSpec as P

from hybrid_parallel import collectives
from hybrid_parallel import mesh as mesh_lib
from hybrid_parallel.analysis import hlo_stats


def compiled_hlo(body, local_shape=(8, 16)) -> str:
  """The compiled program of `body` on each device's [8, 16] block of a 2 × 4 mesh."""
  mesh = mesh_lib.make_mesh(2, 4)
  fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data", "model"),
                             out_specs=P("data", "model"), check_vma=False))
  x = jax.ShapeDtypeStruct((local_shape[0] * 2, local_shape[1] * 4), jnp.float32,
                           sharding=NamedSharding(mesh, P("data", "model")))
  return fn.lower(x).compile().as_text()


def compiled_stats(body, local_shape=(8, 16)):
  return hlo_stats.collective_stats(compiled_hlo(body, local_shape), num_devices=8)


class HloStatsTest(absltest.TestCase):

  def test_each_kind_by_hand(self):
    n = 8 * 16 * 4  # bytes of one device's f32[8,16] block

    def body(x):
      a = jax.lax.psum(x, "model")  # all-reduce, p = 4
      b = jax.lax.all_gather(x, "data", tiled=True)  # all-gather, p = 2, result 2n
      c = jax.lax.ppermute(x, "model", [(i, (i + 1) % 4) for i in range(4)])  # every device sends
      d = jax.lax.psum_scatter(x, "model", scatter_dimension=1, tiled=True)  # result n / 4
      return a + b[:8] + c + jnp.tile(d, (1, 4))

    stats = compiled_stats(body)
    self.assertEqual(stats["all-reduce"].ops, 1)
    self.assertAlmostEqual(stats["all-reduce"].bytes_per_device, 2 * 3 / 4 * n)
    self.assertEqual(stats["all-reduce"].messages_per_device, 6)
    self.assertAlmostEqual(stats["all-gather"].payload_bytes, 2 * n)
    self.assertAlmostEqual(stats["all-gather"].bytes_per_device, 1 / 2 * 2 * n)
    self.assertEqual(stats["all-gather"].messages_per_device, 1)
    self.assertAlmostEqual(stats["collective-permute"].bytes_per_device, n)
    self.assertAlmostEqual(stats["reduce-scatter"].bytes_per_device, 3 * n / 4)
    self.assertEqual(stats["all-to-all"].ops, 0)

  def test_groups_named_by_mesh_axes(self):
    # XLA under JAX >= 0.11 writes a collective's groups as the mesh axes they span (lines as
    # it compiled them for a 2 × 4 mesh); the group is the product of those axes' sizes.
    hlo = """ENTRY %main.0_spmd (param.1: f32[8,16]) -> f32[8,16] {
  %param.1 = f32[8,16]{1,0} parameter(0)
  %psum.7 = f32[8,16]{1,0} all-reduce(%param.1), channel_id=1, replica_groups=mesh['data'=2,'model'=4] {'model'}, use_global_device_ids=true, to_apply=%region_0.0
  %psum.8 = f32[8,16]{1,0} all-reduce(%param.1), channel_id=2, replica_groups=mesh['data'=2,'model'=4] {'data','model'}, use_global_device_ids=true, to_apply=%region_0.0
  ROOT %all_gather.3 = f32[16,16]{1,0} all-gather(%param.1), channel_id=3, replica_groups=mesh['data'=2,'model'=4] {'data'}, dimensions={0}, use_global_device_ids=true
}
"""
    n = 8 * 16 * 4
    stats = hlo_stats.collective_stats(hlo, num_devices=8)
    self.assertAlmostEqual(stats["all-reduce"].bytes_per_device, 2 * 3 / 4 * n + 2 * 7 / 8 * n)
    self.assertEqual(stats["all-reduce"].messages_per_device, 2 * 3 + 2 * 7)
    self.assertAlmostEqual(stats["all-gather"].bytes_per_device, 1 / 2 * 2 * n)

  def test_device_groups_in_each_form(self):
    # Which devices meet in each group: what tells whether a collective crosses hosts.
    groups = lambda text: hlo_stats.device_groups(f"%x = f32[8] all-reduce(%p), {text}", 8)
    self.assertEqual(groups("replica_groups={{0,2},{1,3},{4,6},{5,7}}"),
                     [[0, 2], [1, 3], [4, 6], [5, 7]])
    self.assertEqual(groups("replica_groups=[2,4]<=[8]"), [[0, 1, 2, 3], [4, 5, 6, 7]])
    self.assertEqual(groups("replica_groups=[2,4]<=[4,2]T(1,0)"), [[0, 2, 4, 6], [1, 3, 5, 7]])
    self.assertEqual(groups("replica_groups=mesh['data'=2,'model'=4] {'data'}"),
                     [[0, 4], [1, 5], [2, 6], [3, 7]])
    self.assertEqual(groups("replica_groups=mesh['data'=2,'model'=4] {'model'}"),
                     [[0, 1, 2, 3], [4, 5, 6, 7]])
    self.assertEqual(sorted(groups("replica_groups=mesh['data'=2,'model'=4] {'model','data'}")[0]),
                     list(range(8)))
    self.assertEqual(groups("replica_groups={}"), [list(range(8))])

  def test_parameter_server_serialises_at_the_root(self):
    # 2(p − 1) = 6 permutes of the whole vector over the model axis; in each, one device of
    # every 4 sends, so a device sends 6 · n / 4 on average — but the root sends the sum back
    # 3 times while each worker sends once.
    stats = compiled_stats(lambda x: collectives.parameter_server(x, "model"))
    n = 8 * 16 * 4
    self.assertEqual(stats["collective-permute"].ops, 6)
    self.assertAlmostEqual(stats["collective-permute"].bytes_per_device, 6 * n / 4)
    self.assertAlmostEqual(stats["collective-permute"].busiest_device_bytes, 3 * n)
    self.assertEqual(stats["all-reduce"].ops, 0)

  def test_ring_moves_the_bandwidth_optimal_volume(self):
    stats = compiled_stats(lambda x: collectives.ring(x, "model"))
    n = 8 * 16 * 4
    self.assertEqual(stats["collective-permute"].ops, 2 * 3)
    self.assertAlmostEqual(stats["collective-permute"].bytes_per_device, 2 * 3 / 4 * n)
    self.assertAlmostEqual(stats["collective-permute"].busiest_device_bytes, 2 * 3 / 4 * n)

  def test_async_collectives_and_the_compute_in_flight(self):
    # A scheduled module as XLA:GPU writes it: an all-reduce overlapping a fusion and a
    # convolution, an all-gather overlapping a cuBLAS GEMM and a fusion, a permute overlapping
    # only an elementwise fusion, and a synchronous all-reduce (not asynchronous: not listed).
    hlo = """HloModule m, is_scheduled=true

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p: f32[1024], x: f32[256]) -> f32[1024] {
  %p = f32[1024]{0} parameter(0)
  %x = f32[256]{0} parameter(1)
  %all-reduce-start = f32[1024]{0} all-reduce-start(f32[1024]{0} %p), to_apply=%add
  %fusion.1 = f32[64,64]{1,0} fusion(f32[1024]{0} %p), kind=kLoop, calls=%f1
  %convolution.2 = f32[8,8]{1,0} convolution(f32[64,64]{1,0} %fusion.1, f32[64,64]{1,0} %fusion.1)
  %all-reduce-done = f32[1024]{0} all-reduce-done(f32[1024]{0} %all-reduce-start)
  %all-gather-start = (f32[256]{0}, f32[512]{0}) all-gather-start(f32[256]{0} %x), dimensions={0}
  %custom-call.3 = f32[8,8]{1,0} custom-call(f32[64,64]{1,0} %fusion.1), custom_call_target="__cublas$gemm"
  %fusion.4 = f32[256]{0} fusion(f32[256]{0} %x), kind=kLoop, calls=%f2
  %all-gather-done = f32[512]{0} all-gather-done((f32[256]{0}, f32[512]{0}) %all-gather-start)
  %collective-permute-start = (f32[256]{0}, f32[256]{0}) collective-permute-start(f32[256]{0} %x), source_target_pairs={{0,1},{1,0}}
  %fusion.5 = f32[256]{0} fusion(f32[256]{0} %x), kind=kLoop, calls=%f3
  %collective-permute-done = f32[256]{0} collective-permute-done((f32[256]{0}, f32[256]{0}) %collective-permute-start)
  ROOT %all-reduce = f32[1024]{0} all-reduce(f32[1024]{0} %all-reduce-done), to_apply=%add
}
"""
    found = hlo_stats.async_collectives(hlo)
    self.assertEqual([(c.kind, c.bytes, c.compute_ops_in_flight, c.heavy_ops_in_flight)
                      for c in found],
                     [("all-reduce", 4096, 2, 1), ("all-gather", 2048, 2, 1),
                      ("collective-permute", 1024, 1, 0)])

  def test_only_collectives_beside_a_convolution_or_matmul_count_as_overlapped(self):
    # Trimmed from data 8×1's step compiled for an H100 node (JAX 0.12.0.1, CUDA 13 plugin):
    # fc7's gradient all-reduce runs beside fc6's weight-gradient product, a Triton GEMM fusion;
    # fc6's runs beside the optimizer's elementwise fusions only, and is exposed.
    hlo = """HloModule m, is_scheduled=true

ENTRY %main (g7: f32[4096,4096], g6: f32[9216,4096], a: bf16[9216,256], b: bf16[256,4096]) -> f32[9216,4096] {
  %all-reduce-start.2 = ((f32[4096,4096]{1,0}), f32[4096,4096]{1,0}) all-reduce-start(%g7), channel_id=1, replica_groups=mesh['data'=8,'model'=1] {'data'}, use_global_device_ids=true, to_apply=%region_28.30
  %gemm_fusion_transpose.22 = bf16[9216,4096]{1,0} fusion(%a, %b), kind=kCustom, calls=%fused_computation.gemm_fusion_transpose.22_computation, backend_config={"operation_queue_id":"0","fusion_backend_config":{"kind":"__triton_nested_gemm_fusion"}}
  %wrapped_convert.13 = f32[9216,4096]{1,0} fusion(%gemm_fusion_transpose.22), kind=kLoop, calls=%wrapped_convert_computation.13
  %all-reduce-done.2 = f32[4096,4096]{1,0} all-reduce-done(%all-reduce-start.2)
  %all-reduce-start.1 = ((f32[9216,4096]{1,0}), f32[9216,4096]{1,0}) all-reduce-start(%wrapped_convert.13), channel_id=1, replica_groups=mesh['data'=8,'model'=1] {'data'}, use_global_device_ids=true, to_apply=%region_26.28
  %loop_add_fusion.10 = f32[4096,4096]{1,0} fusion(%all-reduce-done.2, %g7), kind=kLoop, calls=%fused_add.10
  %loop_multiply_fusion.1 = f32[4096,4096]{1,0} fusion(%loop_add_fusion.10), kind=kLoop, calls=%fused_multiply.1
  ROOT %all-reduce-done.1 = f32[9216,4096]{1,0} all-reduce-done(%all-reduce-start.1)
}
"""
    self.assertEqual([(c.name, c.compute_ops_in_flight, c.heavy_ops_in_flight)
                      for c in hlo_stats.async_collectives(hlo)],
                     [("all-reduce-start.2", 2, 1), ("all-reduce-start.1", 2, 0)])
    self.assertEqual(hlo_stats.overlapped(hlo), {"all-reduce-start.2"})

  def test_tpu_fused_reduce_scatter_counts_as_a_reduce_scatter(self):
    # Trimmed from owt8's step compiled for TPU v2 (libtpu 0.0.42.1, benchmarks' compile-only
    # topology): the FC input's gradient, reduce-scattered over a 4-way group, written as a fusion
    # whose computation all-reduces the input padded from 512 to 576 rows and slices this core's
    # 144. It sends what a reduce-scatter of 576 rows sends: (p−1) × 144 rows, not an
    # all-reduce's 2(p−1)/p × 576.
    hlo = """HloModule m

%all-reduce-scatter (input: f32[512,9216]) -> f32[144,9216] {
  %input = f32[512,9216]{1,0:T(8,128)} parameter(0)
  %pad.82 = f32[576,9216]{1,0:T(8,128)} pad(%input, %constant.460), padding=0_64x0_0
  %all-reduce.36 = f32[576,9216]{1,0:T(8,128)} all-reduce(%pad.82), channel_id=3, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%region_4.7.clone
  ROOT %dynamic-slice.9 = f32[144,9216]{1,0:T(8,128)} dynamic-slice(%all-reduce.36, %multiply.11, %constant.462), dynamic_slice_sizes={144,9216}
}

ENTRY %main (p: f32[512,9216]) -> f32[144,9216] {
  %p = f32[512,9216]{1,0:T(8,128)} parameter(0)
  ROOT %fusion = f32[144,9216]{1,0:T(8,128)} fusion(%p), kind=kCustom, calls=%all-reduce-scatter
}
"""
    stats = hlo_stats.collective_stats(hlo, 8)
    self.assertEqual(stats["all-reduce"].ops, 0)
    self.assertEqual(stats["reduce-scatter"].ops, 1)
    self.assertEqual(stats["reduce-scatter"].bytes_per_device, 3 * 144 * 9216 * 4)

  def test_an_async_permute_with_context_scalars_counts_its_result(self):
    # From averaging4's butterfly compiled for TPU v5e (libtpu 0.0.42.1): the start's tuple is
    # (operand, result, u32[] context, u32[] context); four of the 8 devices send the result.
    line = ("  %collective-permute-start.13 = (f32[4096,4096]{1,0:T(8,128)}, "
            "f32[4096,4096]{1,0:T(8,128)}, u32[]{:S(2)}, u32[]{:S(2)}) collective-permute-start("
            "%get-tuple-element.412), channel_id=1, source_target_pairs={{0,1},{1,0},{2,3},{3,2}}")
    stats = hlo_stats.collective_stats(line, 8)["collective-permute"]
    self.assertEqual((stats.ops, stats.payload_bytes), (1, 4096 * 4096 * 4))
    self.assertEqual(stats.bytes_per_device, 4096 * 4096 * 4 * 4 / 8)

  def test_xla_cpu_runs_collectives_synchronously(self):
    hlo = compiled_hlo(lambda x: jax.lax.psum(x, "model"))
    self.assertEqual(hlo_stats.collective_stats(hlo, 8)["all-reduce"].ops, 1)
    self.assertEqual(hlo_stats.async_collectives(hlo), [])

  def test_shapes(self):
    self.assertEqual(hlo_stats.shape_bytes("bf16[3,5]{1,0}"), 30)
    self.assertEqual(hlo_stats.shape_bytes("(f32[2], s32[4])"), 24)


if __name__ == "__main__":
  absltest.main()

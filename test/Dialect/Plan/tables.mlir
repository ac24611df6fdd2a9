// RUN: weft-opt %s | FileCheck %s
// RUN: weft-opt %s | weft-opt | FileCheck %s

// Tests that the plan's tables (kernels, weights, the KV cache) round-trip,
// and a buffer without an offset (before plan-assign-buffers).

// CHECK: plan.kernel @wf_embedding {archs = ["sm_86", "sm_90"], block = array<i64: 256, 1, 1>, entry = "wf_embedding", grid = array<i64: 2, 1, 1>, params = [#plan.param<kind = weight, dtype = f16, bytes = 1024>, #plan.param<kind = input, dtype = i32, bytes = 0>], region = "embedding", shared = 0 : i64, source = "extern \22C\22 __global__ void wf_embedding() {}"}
// CHECK-NEXT: plan.weight {concat_axis = 0 : i64, devices = array<i64: 0, 1>, dtype = #plan.dtype<f16>, name = "q+k", shape = array<i64: 8, 4>, shard_axis = 0 : i64, shard_parts = 2 : i64, sources = [#plan.source<name = "q", shape = [4, 4]>, #plan.source<name = "k", shape = [4, 4]>]}
// CHECK-NEXT: plan.kv_cache {block_tokens = 16 : i64, blocks = array<i64: 32, 32>, dtype = #plan.dtype<bf16>, head_dim = 64 : i64, kv_heads = array<i64: 1, 1>, max_blocks_per_sequence = 8 : i64, max_sequences = 4 : i64, num_kv_heads = 2 : i64}
// CHECK: plan.buffer {bytes = 8192 : i64, device = 0 : i64, index = 0 : i64}
plan.kernel @wf_embedding {archs = ["sm_86", "sm_90"], block = array<i64: 256, 1, 1>, entry = "wf_embedding", grid = array<i64: 2, 1, 1>, params = [#plan.param<kind = weight, dtype = f16, bytes = 1024>, #plan.param<kind = input, dtype = i32, bytes = 0>], region = "embedding", shared = 0 : i64, source = "extern \22C\22 __global__ void wf_embedding() {}"}
plan.weight {concat_axis = 0 : i64, devices = array<i64: 0, 1>, dtype = #plan.dtype<f16>, name = "q+k", shape = array<i64: 8, 4>, shard_axis = 0 : i64, shard_parts = 2 : i64, sources = [#plan.source<name = "q", shape = [4, 4]>, #plan.source<name = "k", shape = [4, 4]>]}
plan.kv_cache {block_tokens = 16 : i64, blocks = array<i64: 32, 32>, dtype = #plan.dtype<bf16>, head_dim = 64 : i64, kv_heads = array<i64: 1, 1>, max_blocks_per_sequence = 8 : i64, max_sequences = 4 : i64, num_kv_heads = 2 : i64}
plan.bucket "decode_b1" attributes {prefill = false, tokens = 1 : i64} {
  plan.buffer {bytes = 8192 : i64, device = 0 : i64, index = 0 : i64}
}

// Decode attention on sm_90: the splits of a (token, KV head) are one
// thread-block cluster and combine their results themselves, so the region
// is one kernel that writes the output; for sm_86 (and with
// --attention-clusters=false) a combine kernel follows the split pass.
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 --max-sequences=8 %s | FileCheck %s
// RUN: weft-emit-cuda --compute-capability=86 --sm-count=82 --block-tokens=16 --max-blocks-per-sequence=64 --max-sequences=8 %s | FileCheck %s --check-prefix=AMPERE
// RUN: weft-emit-cuda --no-source --compile=sm_90 %s | FileCheck %s --check-prefix=SM90
// RUN: weft-emit-cuda --no-source --compile=sm_86 %s | FileCheck %s --check-prefix=SM86

// 1024 positions over 2 KV heads: 16 splits, one cluster of 16 per (token,
// KV head); no scratch for partials.
// CHECK-LABEL: // @decode region 0 "attention": 1 step
// CHECK-NEXT: // step 0: kernel [[K:weft_attention_decode_t2_h8_kv2_d64_bf16_s16c]]
// CHECK-NEXT: //   grid (2, 2, 16) block (128, 1, 1) shared 49152
// CHECK: //   param 6 out: RegionResult 0
// CHECK: constexpr int kSplits = 16;
// CHECK: constexpr bool kClusterCombine = true;
// CHECK: extern "C" __global__ void __launch_bounds__(Config::kThreads) WF_CLUSTER_Z(Config::kSplits) [[K]](
// CHECK: attention::decodeSplit<Config>(

// A short cache: fewer splits, still one cluster of all of them.
// CHECK-LABEL: // @decode_short region 0 "attention": 1 step
// CHECK-NEXT: // step 0: kernel weft_attention_decode_t1_h8_kv2_d64_w256_bf16_s4c
// CHECK-NEXT: //   grid (1, 2, 4)
// CHECK: constexpr bool kClusterCombine = true;

// AMPERE-LABEL: // @decode region 0 "attention": 2 steps
// AMPERE: constexpr bool kClusterCombine = false;
// AMPERE-NOT: WF_CLUSTER_Z
// AMPERE: // step 1: kernel weft_attention_decode_t2_h8_kv2_d64_bf16_s{{[0-9]+}}_combine

// SM90-COUNT-2: //   compiled for sm_90: cubin ok, ptx ok
// SM86-COUNT-2: //   compiled for sm_86: cubin ok, ptx ok

func.func @decode(%q: tensor<2x512xbf16>, %pos: tensor<2xi32>, %slots: tensor<2xi32>,
                  %cache: !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>) -> tensor<2x512xbf16> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 64 : i64, kv_heads = 2 : i64, layer = 5 : i64, num_heads = 8 : i64, tokens = 2 : i64}}
      : (tensor<2x512xbf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>) -> tensor<2x512xbf16> {
  ^bb0(%a: tensor<2x512xbf16>, %b: tensor<2xi32>, %c: tensor<2xi32>, %d: !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 64 : i64, layer = 5 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64}
        : (tensor<2x512xbf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>) -> tensor<2x512xbf16>
    weft.yield %o : tensor<2x512xbf16>
  }
  return %r : tensor<2x512xbf16>
}

func.func @decode_short(%q: tensor<1x512xbf16>, %pos: tensor<1xi32>, %slots: tensor<1xi32>,
                        %cache: !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>) -> tensor<1x512xbf16> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 64 : i64, kv_heads = 2 : i64, layer = 0 : i64, num_heads = 8 : i64, sliding_window = 256 : i64, tokens = 1 : i64}}
      : (tensor<1x512xbf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>) -> tensor<1x512xbf16> {
  ^bb0(%a: tensor<1x512xbf16>, %b: tensor<1xi32>, %c: tensor<1xi32>, %d: !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 64 : i64, layer = 0 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.125 : f64, sliding_window = 256 : i64}
        : (tensor<1x512xbf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 8, kv_heads = 2, head_dim = 64, dtype = bf16>) -> tensor<1x512xbf16>
    weft.yield %o : tensor<1x512xbf16>
  }
  return %r : tensor<1x512xbf16>
}

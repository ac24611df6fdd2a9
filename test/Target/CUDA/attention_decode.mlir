// Decode attention: split flash-decoding over the paged KV cache. Grouped
// heads (8 query heads on 2 KV heads) on the SIMT kernel, a sliding window
// and a 16-head group on the tensor-core kernel, f32 with and without splits.
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 --max-sequences=8 %s | FileCheck %s
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=4 --function=decode_f32 %s | FileCheck %s --check-prefix=ONE
// RUN: weft-emit-cuda --no-source --compile=sm_86 %s | FileCheck %s --check-prefix=SM86
// RUN: weft-emit-cuda --no-source --compile=sm_90 %s | FileCheck %s --check-prefix=SM90

// 1024 positions per sequence (16 x 64) over 2 KV heads: the 4-per-SM target
// (132 SMs) would want 264 splits, a split is at least 64 positions: 16.
// CHECK-LABEL: // @decode region 0 "attention": 2 steps
// CHECK-NEXT: // step 0: kernel [[SPLIT:weft_attention_decode_t2_h8_kv2_d64_bf16_s16_split]]
// CHECK-NEXT: //   grid (2, 2, 16) block (128, 1, 1) shared 49152
// CHECK-NEXT: //   param 0 query: RegionInput 0
// CHECK-NEXT: //   param 1 positions: RegionInput 1
// CHECK-NEXT: //   param 2 slots: RegionInput 2
// CHECK-NEXT: //   param 3 k_cache: KCache layer 5
// CHECK-NEXT: //   param 4 v_cache: VCache layer 5
// CHECK-NEXT: //   param 5 block_tables: BlockTables
// 2 tokens x 8 heads x 16 splits x (64 values + max + sum) floats.
// CHECK-NEXT: //   param 6 partials: Scratch 0 (67584 bytes)
// The kernel instantiates the split template of weft/attention_decode.cuh
// with a Config of the model's and cache's dimensions.
// CHECK: #include "weft/attention_decode.cuh"
// CHECK: struct Config {
// CHECK-NEXT: using elem_t = __nv_bfloat16;
// CHECK: constexpr int kTokens = 2;
// CHECK-NEXT: constexpr int kHeads = 8;
// CHECK-NEXT: constexpr int kKvHeads = 2;
// CHECK-NEXT: constexpr int kGroup = 4;
// CHECK-NEXT: constexpr int kHeadDim = 64;
// CHECK-NEXT: constexpr int kWindow = 0;
// CHECK-NEXT: constexpr float kScale = 0.125f;
// CHECK-NEXT: constexpr float kScaleLog2 = 0.18033688f;
// CHECK-NEXT: constexpr float kSoftcapLog2 = 0.0f;
// CHECK-NEXT: constexpr int kBlockTokens = 16;
// CHECK-NEXT: constexpr int kMaxBlocks = 64;
// CHECK-NEXT: constexpr int kMaxSequences = 8;
// CHECK: constexpr int kSplits = 16;
// CHECK: constexpr int kHeadsPerBlock = 4;
// CHECK: constexpr int kStages = 3;
// 16-byte loads: 8 bf16, a 64-wide head row is 8 of them.
// CHECK: constexpr int kVec = 8;
// CHECK: static constexpr int kWords = 4;
// CHECK: constexpr int kLanesPerRow = 8;
// CHECK: static constexpr bool RELEASE_EARLY = false;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::attention::decodeSplitKernel<Config, false>
// CHECK: // step 1: kernel [[COMBINE:weft_attention_decode_t2_h8_kv2_d64_bf16_s16_combine]]
// CHECK-NEXT: //   grid (2, 8, 1) block (64, 1, 1) shared 68
// CHECK-NEXT: //   param 0 positions: RegionInput 1
// CHECK-NEXT: //   param 1 slots: RegionInput 2
// CHECK-NEXT: //   param 2 partials: Scratch 0 (67584 bytes)
// CHECK-NEXT: //   param 3 out: RegionResult 0
// CHECK: // entry: weft::kernels::attention::decodeCombineKernel<Config>

// The window bounds the span: 100 positions, two splits. 8 query heads per
// KV head take the tensor cores; a scale other than 1/sqrt(head_dim) is in
// the name (0.1f = 0x3dcccccd).
// CHECK-LABEL: // @decode_window region 0 "attention": 2 steps
// CHECK-NEXT: // step 0: kernel [[WSPLIT:weft_attention_decode_t1_h16_kv2_d128_w100_f16_sc3dcccccd_s2_split]]
// CHECK-NEXT: //   grid (1, 2, 2) block (64, 1, 1) shared 34816
// CHECK: //   param 3 k_cache: KCache layer 1
// CHECK: //   param 6 partials: Scratch 0 (16640 bytes)
// CHECK: using elem_t = __half;
// CHECK: constexpr int kHeads = 16;
// CHECK-NEXT: constexpr int kKvHeads = 2;
// CHECK-NEXT: constexpr int kGroup = 8;
// CHECK-NEXT: constexpr int kHeadDim = 128;
// CHECK-NEXT: constexpr int kWindow = 100;
// CHECK-NEXT: constexpr float kScale = 0.1f;
// CHECK-NEXT: constexpr float kScaleLog2 = 0.144269504f;
// CHECK: constexpr int kSplits = 2;
// CHECK: constexpr int kHeadsPerBlock = 8;
// CHECK: constexpr int kKeys = 32;
// CHECK: // entry: weft::kernels::attention::decodeSplitKernel<Config, true>
// CHECK: // step 1: kernel weft_attention_decode_t1_h16_kv2_d128_w100_f16_sc3dcccccd_s2_combine
// CHECK-NEXT: //   grid (1, 16, 1) block (128, 1, 1) shared 12

// f32: 4-byte elements, 16-byte loads of 4 of them.
// CHECK-LABEL: // @decode_f32 region 0 "attention": 2 steps
// CHECK-NEXT: // step 0: kernel weft_attention_decode_t4_h4_kv2_d16_f32_s8_split
// CHECK-NEXT: //   grid (4, 2, 8) block (128, 1, 1) shared 49152
// CHECK: using elem_t = float;
// CHECK: constexpr int kVec = 4;

// A 64-position cache needs no splits: one kernel writes the output.
// ONE: // @decode_f32 region 0 "attention": 1 step
// ONE-NEXT: // step 0: kernel weft_attention_decode_t4_h4_kv2_d16_f32_s1
// ONE-NEXT: //   grid (4, 2, 1) block (128, 1, 1) shared 49152
// ONE: //   param 6 out: RegionResult 0
// ONE: constexpr int kSplits = 1;
// ONE-NOT: _combine

// SM86-COUNT-6: //   compiled for sm_86: cubin ok, ptx ok
// SM90-COUNT-6: //   compiled for sm_90: cubin ok, ptx ok

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

func.func @decode_window(%q: tensor<1x2048xf16>, %pos: tensor<1xi32>, %slots: tensor<1xi32>,
                         %cache: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 128, dtype = f16>) -> tensor<1x2048xf16> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 128 : i64, kv_heads = 2 : i64, layer = 1 : i64, num_heads = 16 : i64, sliding_window = 100 : i64, tokens = 1 : i64}}
      : (tensor<1x2048xf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 128, dtype = f16>) -> tensor<1x2048xf16> {
  ^bb0(%a: tensor<1x2048xf16>, %b: tensor<1xi32>, %c: tensor<1xi32>, %d: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 128, dtype = f16>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 128 : i64, layer = 1 : i64, num_heads = 16 : i64, num_kv_heads = 2 : i64, scale = 0.1 : f64, sliding_window = 100 : i64}
        : (tensor<1x2048xf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 128, dtype = f16>) -> tensor<1x2048xf16>
    weft.yield %o : tensor<1x2048xf16>
  }
  return %r : tensor<1x2048xf16>
}

func.func @decode_f32(%q: tensor<4x64xf32>, %pos: tensor<4xi32>, %slots: tensor<4xi32>,
                      %cache: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<4x64xf32> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 0 : i64, num_heads = 4 : i64, tokens = 4 : i64}}
      : (tensor<4x64xf32>, tensor<4xi32>, tensor<4xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x64xf32>, %b: tensor<4xi32>, %c: tensor<4xi32>, %d: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 16 : i64, layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
        : (tensor<4x64xf32>, tensor<4xi32>, tensor<4xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<4x64xf32>
    weft.yield %o : tensor<4x64xf32>
  }
  return %r : tensor<4x64xf32>
}

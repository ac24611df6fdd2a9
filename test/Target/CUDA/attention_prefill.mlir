// Prefill attention: above the GEMV sizes a step may hold decode tokens of
// many sequences and prefill chunks of several, so flash-decoding (which
// owns one-token sequences and pads) comes first and the causal chunk
// kernel on tensor cores (mma.sync m16n8k16, bf16 and f16) follows for rows
// whose neighbour has the same slot, each run of equal slots with its own
// block table; with and without a sliding window. f32 chunks run the split
// kernels alone.
// RUN: weft-emit-cuda --block-tokens=32 --max-blocks-per-sequence=128 --max-sequences=2 %s | FileCheck %s
// RUN: weft-emit-cuda --no-source --compile=sm_86 %s | FileCheck %s --check-prefix=SM86
// RUN: weft-emit-cuda --no-source --compile=sm_90 %s | FileCheck %s --check-prefix=SM90

// 100 tokens: two 64-row query tiles per head. head_dim 128 takes 32-key
// tiles, two stages of K and V (2 x 2 x 32 x 136 x 2 bytes), the rows'
// bounds (32 bytes) and each row's slot and owned position (512 bytes).
// CHECK-LABEL: // @prefill region 0 "attention": 3 steps
// CHECK-NEXT: // step 0: kernel weft_attention_decode_t100_h8_kv2_d128_bf16_s3_split
// Rows of chunks are left to the chunk kernel (chunkRow in
// weft/attention.cuh reads kChunkKernel).
// CHECK: constexpr bool kChunkKernel = true;
// CHECK: // step 1: kernel weft_attention_decode_t100_h8_kv2_d128_bf16_s3_combine
// CHECK: constexpr bool kChunkKernel = true;
// CHECK: // step 2: kernel [[PREFILL:weft_attention_prefill_t100_h8_kv2_d128_bf16]]
// CHECK-NEXT: //   grid (2, 8, 1) block (128, 1, 1) shared 35360
// CHECK-NEXT: //   param 0 query: RegionInput 0
// CHECK-NEXT: //   param 1 positions: RegionInput 1
// CHECK-NEXT: //   param 2 slots: RegionInput 2
// CHECK-NEXT: //   param 3 k_cache: KCache layer 2
// CHECK-NEXT: //   param 4 v_cache: VCache layer 2
// CHECK-NEXT: //   param 5 block_tables: BlockTables
// CHECK-NEXT: //   param 6 out: RegionResult 0
// CHECK: #include "weft/attention_prefill.cuh"
// CHECK: struct Config {
// CHECK-NEXT: using elem_t = __nv_bfloat16;
// CHECK: constexpr int kTokens = 100;
// CHECK-NEXT: constexpr int kHeads = 8;
// CHECK-NEXT: constexpr int kKvHeads = 2;
// CHECK-NEXT: constexpr int kGroup = 4;
// CHECK-NEXT: constexpr int kHeadDim = 128;
// CHECK-NEXT: constexpr int kWindow = 0;
// CHECK-NEXT: constexpr float kScale = 0.0883883476f;
// CHECK-NEXT: constexpr float kScaleLog2 = 0.127517431f;
// CHECK-NEXT: constexpr float kSoftcapLog2 = 0.0f;
// CHECK-NEXT: constexpr int kBlockTokens = 32;
// CHECK-NEXT: constexpr int kMaxBlocks = 128;
// CHECK-NEXT: constexpr int kMaxSequences = 2;
// CHECK: constexpr int kRows = 64;
// CHECK-NEXT: constexpr int kKeys = 32;
// CHECK: constexpr int kPad = kHeadDim + 8;
// CHECK: static constexpr bool RELEASE_EARLY = false;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::attention::prefillChunkKernel<Config>

// head_dim 64: 64-key tiles (2 x 2 x 64 x 72 x 2 + 32 + 512 bytes).
// CHECK-LABEL: // @prefill_window region 0 "attention": 2 steps
// CHECK-NEXT: // step 0: kernel weft_attention_decode_t256_h12_kv4_d64_w4096_f16_s1
// CHECK: // step 1: kernel weft_attention_prefill_t256_h12_kv4_d64_w4096_f16
// CHECK-NEXT: //   grid (4, 12, 1) block (128, 1, 1) shared 37408
// CHECK: //   param 3 k_cache: KCache layer 0
// CHECK: using elem_t = __half;
// CHECK: constexpr int kGroup = 3;
// CHECK-NEXT: constexpr int kHeadDim = 64;
// CHECK-NEXT: constexpr int kWindow = 4096;
// CHECK-NEXT: constexpr float kScale = 0.125f;
// CHECK: constexpr int kKeys = 64;

// f32: no tensor-core path; the split kernels take the 32 tokens, which
// share the split target: 528 blocks over 32 tokens x 2 KV heads, 9 splits.
// CHECK-LABEL: // @prefill_f32 region 0 "attention": 2 steps
// CHECK-NEXT: // step 0: kernel weft_attention_decode_t32_h4_kv2_d16_f32_s9_split
// CHECK-NEXT: //   grid (32, 2, 9) block (128, 1, 1) shared 49152
// CHECK: //   param 6 partials: Scratch 0 (82944 bytes)
// CHECK: // step 1: kernel weft_attention_decode_t32_h4_kv2_d16_f32_s9_combine
// CHECK-NEXT: //   grid (32, 4, 1) block (32, 1, 1) shared 40
// CHECK: constexpr bool kChunkKernel = false;

// SM86-COUNT-7: //   compiled for sm_86: cubin ok, ptx ok
// SM90-COUNT-7: //   compiled for sm_90: cubin ok, ptx ok

func.func @prefill(%q: tensor<100x1024xbf16>, %pos: tensor<100xi32>, %slots: tensor<100xi32>,
                   %cache: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 128, dtype = bf16>) -> tensor<100x1024xbf16> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 128 : i64, kv_heads = 2 : i64, layer = 2 : i64, num_heads = 8 : i64, tokens = 100 : i64}}
      : (tensor<100x1024xbf16>, tensor<100xi32>, tensor<100xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 128, dtype = bf16>) -> tensor<100x1024xbf16> {
  ^bb0(%a: tensor<100x1024xbf16>, %b: tensor<100xi32>, %c: tensor<100xi32>, %d: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 128, dtype = bf16>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 128 : i64, layer = 2 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.088388347648318433 : f64}
        : (tensor<100x1024xbf16>, tensor<100xi32>, tensor<100xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 128, dtype = bf16>) -> tensor<100x1024xbf16>
    weft.yield %o : tensor<100x1024xbf16>
  }
  return %r : tensor<100x1024xbf16>
}

func.func @prefill_window(%q: tensor<256x768xf16>, %pos: tensor<256xi32>, %slots: tensor<256xi32>,
                          %cache: !weft.kv_cache<layers = 2, kv_heads = 4, head_dim = 64, dtype = f16>) -> tensor<256x768xf16> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 64 : i64, kv_heads = 4 : i64, layer = 0 : i64, num_heads = 12 : i64, sliding_window = 4096 : i64, tokens = 256 : i64}}
      : (tensor<256x768xf16>, tensor<256xi32>, tensor<256xi32>, !weft.kv_cache<layers = 2, kv_heads = 4, head_dim = 64, dtype = f16>) -> tensor<256x768xf16> {
  ^bb0(%a: tensor<256x768xf16>, %b: tensor<256xi32>, %c: tensor<256xi32>, %d: !weft.kv_cache<layers = 2, kv_heads = 4, head_dim = 64, dtype = f16>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 64 : i64, layer = 0 : i64, num_heads = 12 : i64, num_kv_heads = 4 : i64, scale = 0.125 : f64, sliding_window = 4096 : i64}
        : (tensor<256x768xf16>, tensor<256xi32>, tensor<256xi32>, !weft.kv_cache<layers = 2, kv_heads = 4, head_dim = 64, dtype = f16>) -> tensor<256x768xf16>
    weft.yield %o : tensor<256x768xf16>
  }
  return %r : tensor<256x768xf16>
}

func.func @prefill_f32(%q: tensor<32x64xf32>, %pos: tensor<32xi32>, %slots: tensor<32xi32>,
                       %cache: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<32x64xf32> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 1 : i64, num_heads = 4 : i64, tokens = 32 : i64}}
      : (tensor<32x64xf32>, tensor<32xi32>, tensor<32xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<32x64xf32> {
  ^bb0(%a: tensor<32x64xf32>, %b: tensor<32xi32>, %c: tensor<32xi32>, %d: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 16 : i64, layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
        : (tensor<32x64xf32>, tensor<32xi32>, tensor<32xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<32x64xf32>
    weft.yield %o : tensor<32x64xf32>
  }
  return %r : tensor<32x64xf32>
}

// A QKV projection with RoPE and the KV-cache write as its epilogue
// (weft-fuse-projection-rope): 2 query heads and 1 KV head of 32.
// RUN: weft-emit-cuda --block-tokens=32 --max-blocks-per-sequence=100 %s | FileCheck %s
// RUN: weft-emit-cuda --unique --no-source --compile=sm_86 %s | FileCheck %s --check-prefix=COMPILED
// RUN: weft-emit-cuda --unique --no-source --compile=sm_90 %s | FileCheck %s --check-prefix=COMPILED
// RUN: not weft-emit-cuda %S/Inputs/projection_rope_narrow.mlir 2>&1 | FileCheck %s --check-prefix=NARROW

// Two tokens: the GEMV (one FMA per weight) with the epilogue, one kernel.
// A column is the pair (i, i + 16) of one of the 4 heads (2 Q, 1 K, 1 V).
// CHECK-LABEL: // @two_tokens region 0 "rms_norm_linear_rope_kv_write": 1 step
// CHECK-NEXT: // step 0: kernel [[GEMV:weft_rms_norm_linear_rope_kv_write_t2_k64_n128_gemv_[0-9a-f]+]]
// CHECK: //   param 3 w_scales: Scalar = 0
// CHECK-NEXT: //   param 4 candidates: Scalar = 0
// CHECK-NEXT: //   param 5 positions: RegionInput 3
// CHECK-NEXT: //   param 6 slots: RegionInput 4
// CHECK-NEXT: //   param 7 block_tables: BlockTables
// CHECK-NEXT: //   param 8 k_cache: KCache layer 2
// CHECK-NEXT: //   param 9 v_cache: VCache layer 2
// CHECK-NEXT: //   param 10 out0: RegionResult 0
// CHECK: #include "weft/gemv.cuh"
// CHECK: __constant__ double wf_inv_freq[1][16] = {{[{][{]}}
// Q rotated and yielded, K rotated and cached, V cached; pointers from the
// entry's pack (positions 0, the cache write's 0-4, out0 5).
// CHECK: struct Heads0 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 2, TABLE = 0, OUT = 5, OUTS = 1;
// CHECK-NEXT: using part_t = __half;
// CHECK: struct Heads1 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 1, TABLE = 0, CACHE = 1;
// CHECK: struct Heads2 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 1, CACHE = 2;
// CHECK: static constexpr int T = 2, TILES = 1, K = 64, NW = 128, NC = 64;
// CHECK: RPC = 2,
// CHECK: return col / 16 * 32 + j * 16 + col % 16;
// CHECK: static constexpr int D = 32, HALF = D / 2;
// CHECK-NEXT: static constexpr int KV_HEADS = 1, BLOCK_TOKENS = 32, MAX_BLOCKS = 100, MAX_SEQUENCES = 1;
// CHECK: using Epilogue = weft::kernels::RopeEpilogue<weft::kernels::NoBias, 0, weft::kernels::CacheWrite<0, 1, 2, 3, 4>, Heads0, Heads1, Heads2>;
// CHECK: // entry: weft::kernels::gemvKernel<Config, const int, const int, const int, Config::cache_t, Config::cache_t, __half>

// Eight bf16 tokens: the tensor-core GEMV (16-row tiles of half heads);
// the bias goes through the row mapping too.
// CHECK-LABEL: // @eight_tokens region 0 "rms_norm_linear_rope_kv_write": 1 step
// CHECK: //   param 5 bias: RegionInput 3
// CHECK: MMA = true
// CHECK: using Epilogue = weft::kernels::RopeEpilogue<weft::kernels::Bias<0>, 1, weft::kernels::CacheWrite<1, 2, 3, 4, 5>, Heads0, Heads1, Heads2>;

// Forty tokens: cuBLASLt writes f32 rows, and one kernel adds the bias,
// rounds, rotates and writes the cache over them (a block per token).
// CHECK-LABEL: // @forty_tokens region 0 "rms_norm_linear_rope_kv_write": 3 steps
// CHECK: // step 1: gemm m 40 n 128 k 64 (f16 x f16 -> f32)
// CHECK: // step 2: kernel weft_rms_norm_linear_rope_kv_write_rows_t40_n128_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (1, 1, 40) block (256, 1, 1) shared 0
// CHECK: //   param 2 bias: RegionInput 3
// CHECK: using Epilogue = weft::kernels::RopeEpilogue<weft::kernels::Bias<0>, 1, weft::kernels::CacheWrite<1, 2, 3, 4, 5>, Heads0, Heads1, Heads2>;
// CHECK: // entry: weft::kernels::gemvReduceKernel<Config, const __half, const int, const int, const int, Config::cache_t, Config::cache_t, __half>

// 4-bit codes: the GEMV keeps one row per column (its tiles and blocks as
// without RoPE) and writes f32 rows; the epilogue is a second kernel.
// CHECK-LABEL: // @four_bit region 0 "rms_norm_linear_rope_kv_write": 2 steps
// CHECK-NEXT: // step 0: kernel weft_rms_norm_linear_rope_kv_write_t1_k128_n128_gemv_{{[0-9a-f]+}}
// CHECK: //   param 5 rows: Scratch 5 (512 bytes)
// CHECK: static constexpr int T = 1, TILES = 1, K = 128, NW = 128, NC = 128;
// CHECK: using Epilogue = weft::kernels::ColumnEpilogue<weft::kernels::NoBias, weft::kernels::Sum,
// CHECK-NEXT: weft::kernels::Columns<0, 128, 0, 1>>;
// CHECK-NEXT: static constexpr bool RELEASE_EARLY = true;
// CHECK: // entry: weft::kernels::gemvKernel<Config, float>
// CHECK: // step 1: kernel weft_rms_norm_linear_rope_kv_write_rows_t1_n128_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (1, 1, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 rows: Scratch 5 (512 bytes)
// CHECK-NEXT: //   param 1 candidates: Scalar = 0
// CHECK-NEXT: //   param 2 positions: RegionInput 3
// CHECK-NOT: bias
// CHECK: using Epilogue = weft::kernels::RopeEpilogue<weft::kernels::NoBias, 0, weft::kernels::CacheWrite<0, 1, 2, 3, 4>, Heads0, Heads1, Heads2>;
// CHECK-NEXT: static constexpr bool RELEASE_EARLY = true;
// CHECK: // entry: weft::kernels::gemvReduceKernel<Config, const int, const int, const int, Config::cache_t, Config::cache_t, __half>

// COMPILED-COUNT-6: compiled for sm_{{86|90}}: cubin ok, ptx ok

// NARROW: error: {{.+}}a RoPE epilogue needs a head_dim that is a multiple of 32 (16-row tiles of half heads), got 16

func.func @two_tokens(%x: tensor<2x64xf16>, %g: tensor<64xf16>, %w: tensor<128x64xf16>, %pos: tensor<2xi32>,
    %slots: tensor<2xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>) -> tensor<2x64xf16> {
  %r = weft.fusion "rms_norm_linear_rope_kv_write" (%x, %g, %w, %pos, %slots, %cache) {dims = {tokens = 2 : i64}}
      : (tensor<2x64xf16>, tensor<64xf16>, tensor<128x64xf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>) -> tensor<2x64xf16> {
  ^bb0(%a: tensor<2x64xf16>, %ga: tensor<64xf16>, %c: tensor<128x64xf16>, %p: tensor<2xi32>, %sl: tensor<2xi32>, %ca: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>):
    %n = weft.rms_norm %a, %ga {epsilon = 1.0e-5 : f64} : (tensor<2x64xf16>, tensor<64xf16>) -> tensor<2x64xf16>
    %y = weft.linear %n, %c : (tensor<2x64xf16>, tensor<128x64xf16>) -> tensor<2x128xf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<2x128xf16> -> (tensor<2x64xf16>, tensor<2x32xf16>, tensor<2x32xf16>)
    %rq = weft.rope %s#0, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<2x64xf16>, tensor<2xi32>) -> tensor<2x64xf16>
    %rk = weft.rope %s#1, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<2x32xf16>, tensor<2xi32>) -> tensor<2x32xf16>
    weft.kv_write %rk, %s#2, %p, %sl, %ca {layer = 2 : i64} : tensor<2x32xf16>, tensor<2x32xf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>
    weft.yield %rq : tensor<2x64xf16>
  }
  return %r : tensor<2x64xf16>
}

func.func @eight_tokens(%x: tensor<8x64xbf16>, %g: tensor<64xbf16>, %w: tensor<128x64xbf16>, %bias: tensor<128xbf16>, %pos: tensor<8xi32>,
    %slots: tensor<8xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = bf16>) -> tensor<8x64xbf16> {
  %r = weft.fusion "rms_norm_linear_rope_kv_write" (%x, %g, %w, %bias, %pos, %slots, %cache) {dims = {tokens = 8 : i64}}
      : (tensor<8x64xbf16>, tensor<64xbf16>, tensor<128x64xbf16>, tensor<128xbf16>, tensor<8xi32>, tensor<8xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = bf16>) -> tensor<8x64xbf16> {
  ^bb0(%a: tensor<8x64xbf16>, %ga: tensor<64xbf16>, %c: tensor<128x64xbf16>, %bb: tensor<128xbf16>, %p: tensor<8xi32>, %sl: tensor<8xi32>, %ca: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = bf16>):
    %n = weft.rms_norm %a, %ga {epsilon = 1.0e-5 : f64} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
    %y = weft.linear %n, %c, %bb : (tensor<8x64xbf16>, tensor<128x64xbf16>, tensor<128xbf16>) -> tensor<8x128xbf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<8x128xbf16> -> (tensor<8x64xbf16>, tensor<8x32xbf16>, tensor<8x32xbf16>)
    %rq = weft.rope %s#0, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<8x64xbf16>, tensor<8xi32>) -> tensor<8x64xbf16>
    %rk = weft.rope %s#1, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<8x32xbf16>, tensor<8xi32>) -> tensor<8x32xbf16>
    weft.kv_write %rk, %s#2, %p, %sl, %ca {layer = 2 : i64} : tensor<8x32xbf16>, tensor<8x32xbf16>, tensor<8xi32>, tensor<8xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = bf16>
    weft.yield %rq : tensor<8x64xbf16>
  }
  return %r : tensor<8x64xbf16>
}

func.func @forty_tokens(%x: tensor<40x64xf16>, %g: tensor<64xf16>, %w: tensor<128x64xf16>, %bias: tensor<128xf16>, %pos: tensor<40xi32>,
    %slots: tensor<40xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>) -> tensor<40x64xf16> {
  %r = weft.fusion "rms_norm_linear_rope_kv_write" (%x, %g, %w, %bias, %pos, %slots, %cache) {dims = {tokens = 40 : i64}}
      : (tensor<40x64xf16>, tensor<64xf16>, tensor<128x64xf16>, tensor<128xf16>, tensor<40xi32>, tensor<40xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>) -> tensor<40x64xf16> {
  ^bb0(%a: tensor<40x64xf16>, %ga: tensor<64xf16>, %c: tensor<128x64xf16>, %bb: tensor<128xf16>, %p: tensor<40xi32>, %sl: tensor<40xi32>, %ca: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>):
    %n = weft.rms_norm %a, %ga {epsilon = 1.0e-5 : f64} : (tensor<40x64xf16>, tensor<64xf16>) -> tensor<40x64xf16>
    %y = weft.linear %n, %c, %bb : (tensor<40x64xf16>, tensor<128x64xf16>, tensor<128xf16>) -> tensor<40x128xf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<40x128xf16> -> (tensor<40x64xf16>, tensor<40x32xf16>, tensor<40x32xf16>)
    %rq = weft.rope %s#0, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<40x64xf16>, tensor<40xi32>) -> tensor<40x64xf16>
    %rk = weft.rope %s#1, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<40x32xf16>, tensor<40xi32>) -> tensor<40x32xf16>
    weft.kv_write %rk, %s#2, %p, %sl, %ca {layer = 2 : i64} : tensor<40x32xf16>, tensor<40x32xf16>, tensor<40xi32>, tensor<40xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>
    weft.yield %rq : tensor<40x64xf16>
  }
  return %r : tensor<40x64xf16>
}

func.func @four_bit(%x: tensor<1x128xf16>, %g: tensor<128xf16>, %pos: tensor<1xi32>, %slots: tensor<1xi32>,
    %cache: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>) -> tensor<1x64xf16> {
  %w = weft.weight "attn.qkv" {quant = #weft.quant<bits = 4, group = 128>} : tensor<128x128xf16>
  %r = weft.fusion "rms_norm_linear_rope_kv_write" (%x, %g, %w, %pos, %slots, %cache) {dims = {tokens = 1 : i64}}
      : (tensor<1x128xf16>, tensor<128xf16>, tensor<128x128xf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>) -> tensor<1x64xf16> {
  ^bb0(%a: tensor<1x128xf16>, %ga: tensor<128xf16>, %c: tensor<128x128xf16>, %p: tensor<1xi32>, %sl: tensor<1xi32>, %ca: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>):
    %n = weft.rms_norm %a, %ga {epsilon = 1.0e-5 : f64} : (tensor<1x128xf16>, tensor<128xf16>) -> tensor<1x128xf16>
    %y = weft.linear %n, %c : (tensor<1x128xf16>, tensor<128x128xf16>) -> tensor<1x128xf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<1x128xf16> -> (tensor<1x64xf16>, tensor<1x32xf16>, tensor<1x32xf16>)
    %rq = weft.rope %s#0, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<1x64xf16>, tensor<1xi32>) -> tensor<1x64xf16>
    %rk = weft.rope %s#1, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<1x32xf16>, tensor<1xi32>) -> tensor<1x32xf16>
    weft.kv_write %rk, %s#2, %p, %sl, %ca {layer = 2 : i64} : tensor<1x32xf16>, tensor<1x32xf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 32, dtype = f16>
    weft.yield %rq : tensor<1x64xf16>
  }
  return %r : tensor<1x64xf16>
}

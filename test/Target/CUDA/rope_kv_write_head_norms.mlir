// Qwen3's per-head RMSNorm of Q and K inside the RoPE + KV-write kernel:
// every thread loads its pair and joins its head's sum of squares before
// threads past the last head return; the values are not normalized.
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 %s | FileCheck %s
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 --compile=sm_86 %s | FileCheck %s --check-prefix=COMPILED
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 --compute-capability=90 --compile=sm_90 %s | FileCheck %s --check-prefix=COMPILED

// CHECK-LABEL: // @norms region 0 "rope_kv_write": 1 step
// CHECK-NEXT: // step 0: kernel weft_norm_rope_kv_write_h12_d128_{{[0-9a-f]+}}
// 12 heads (8 Q, 2 K, 2 V) of 64 pairs, 2 heads a block.
// CHECK-NEXT: //   grid (6, 3, 1) block (128, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x0: RegionInput 0
// CHECK-NEXT: //   param 1 positions: RegionInput 2
// CHECK-NEXT: //   param 2 norm_w0: RegionInput 1
// CHECK-NEXT: //   param 3 keys: RegionInput 3
// CHECK-NEXT: //   param 4 norm_w1: RegionInput 4
// Queries and keys normalized per head (each with its own weight) and
// rotated; values copied into the cache.
// CHECK: struct Heads0 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 8, IN = 0, TABLE = 0, POSITIONS = 1, NORM_W = 2, OUT = 10, OUTS = 1;
// CHECK-NEXT: static constexpr float EPS = 1e-06f;
// CHECK-NEXT: using norm_t = __nv_bfloat16;
// CHECK: struct Heads1 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 2, IN = 3, TABLE = 0, POSITIONS = 1, NORM_W = 4, CACHE = 1;
// CHECK-NEXT: static constexpr float EPS = 1e-06f;
// CHECK: struct Heads2 : weft::kernels::HeadGroup {
// CHECK-NEXT: static constexpr int HEADS = 2, IN = 5, CACHE = 2;
// CHECK-NEXT: using res_t = __nv_bfloat16;
// CHECK-NEXT: };
// CHECK: static constexpr int WRITE_POSITIONS = 1, SLOTS = 6, K_CACHE = 7, V_CACHE = 8, BLOCK_TABLES = 9;
// CHECK: using Groups = weft::kernels::HeadGroups<Heads0, Heads1, Heads2>;
// CHECK: // entry: weft::kernels::ropeKvWriteKernel<Config, const __nv_bfloat16, const int, const __nv_bfloat16, const __nv_bfloat16, const __nv_bfloat16, const __nv_bfloat16, const int, Config::cache_t, Config::cache_t, const int, __nv_bfloat16>

// COMPILED: compiled for sm_{{86|90}}: cubin ok
!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 128, dtype = bf16>
func.func @norms(%q: tensor<3x1024xbf16>, %wq: tensor<128xbf16>, %pos: tensor<3xi32>, %k: tensor<3x256xbf16>,
                 %wk: tensor<128xbf16>, %v: tensor<3x256xbf16>, %slots: tensor<3xi32>, %cache: !cache)
    -> tensor<3x1024xbf16> {
  %r = weft.fusion "rope_kv_write" (%q, %wq, %pos, %k, %wk, %v, %slots, %cache) {dims = {head_dim = 128 : i64, kv_heads = 2 : i64, layer = 0 : i64, tokens = 3 : i64}}
      : (tensor<3x1024xbf16>, tensor<128xbf16>, tensor<3xi32>, tensor<3x256xbf16>, tensor<128xbf16>, tensor<3x256xbf16>, tensor<3xi32>, !cache) -> tensor<3x1024xbf16> {
  ^bb0(%a: tensor<3x1024xbf16>, %aw: tensor<128xbf16>, %p: tensor<3xi32>, %b: tensor<3x256xbf16>, %bw: tensor<128xbf16>,
       %c: tensor<3x256xbf16>, %s: tensor<3xi32>, %kv: !cache):
    %qn = weft.head_rms_norm %a, %aw {head_dim = 128 : i64, epsilon = 1.0e-06 : f64} : (tensor<3x1024xbf16>, tensor<128xbf16>) -> tensor<3x1024xbf16>
    %kn = weft.head_rms_norm %b, %bw {head_dim = 128 : i64, epsilon = 1.0e-06 : f64} : (tensor<3x256xbf16>, tensor<128xbf16>) -> tensor<3x256xbf16>
    %qr = weft.rope %qn, %p {head_dim = 128 : i64, theta = 1.0e+06 : f64} : (tensor<3x1024xbf16>, tensor<3xi32>) -> tensor<3x1024xbf16>
    %kr = weft.rope %kn, %p {head_dim = 128 : i64, theta = 1.0e+06 : f64} : (tensor<3x256xbf16>, tensor<3xi32>) -> tensor<3x256xbf16>
    weft.kv_write %kr, %c, %p, %s, %kv {layer = 0 : i64} : tensor<3x256xbf16>, tensor<3x256xbf16>, tensor<3xi32>, tensor<3xi32>, !cache
    weft.yield %qr : tensor<3x1024xbf16>
  }
  return %r : tensor<3x1024xbf16>
}

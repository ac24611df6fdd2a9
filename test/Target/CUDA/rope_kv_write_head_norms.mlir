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
// CHECK: using norm_w0_t = __nv_bfloat16;
// CHECK: float a = 0.0f, b = 0.0f, squares = 0.0f;
// CHECK-NEXT: if (head < 8) {
// CHECK: loadPair<Config, 8>(x0, t, h, i, a, b);
// CHECK-NEXT: squares = a * a + b * b;
// CHECK: else if (head < 10) {
// CHECK: loadPair<Config, 2>(keys, t, h, i, a, b);
// CHECK-NEXT: squares = a * a + b * b;
// CHECK: else if (head < 12) {
// CHECK: loadPair<Config, 2>(values, t, h, i, a, b);
// CHECK-NEXT: }
// CHECK-NEXT: const float headSquares = headSumSquares<Config>(squares);
// CHECK-NEXT: if (head >= Config::HEADS)
// CHECK-NEXT: return;
// CHECK: normPair<Config, norm0_t>(headSquares, norm_w0, i, 1e-06f, a, b);
// CHECK-NEXT: rotatePair<res0_t>
// CHECK: normPair<Config, norm1_t>(headSquares, norm_w1, i, 1e-06f, a, b);
// CHECK-NEXT: rotatePair<res1_t>
// CHECK-NEXT: cachePair<Config>(k_cache, slot, h, i, a, b);
// CHECK: else {
// CHECK-NOT: normPair
// CHECK: cachePair<Config>(v_cache, slot, h, i, a, b);

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

// A RoPE epilogue over heads of 16 (the pass would not form it; the emitter refuses it).
func.func @narrow(%x: tensor<2x64xf16>, %g: tensor<64xf16>, %w: tensor<64x64xf16>, %pos: tensor<2xi32>,
    %slots: tensor<2xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 16, dtype = f16>) -> tensor<2x32xf16> {
  %r = weft.fusion "rms_norm_linear_rope_kv_write" (%x, %g, %w, %pos, %slots, %cache) {dims = {tokens = 2 : i64}}
      : (tensor<2x64xf16>, tensor<64xf16>, tensor<64x64xf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 16, dtype = f16>) -> tensor<2x32xf16> {
  ^bb0(%a: tensor<2x64xf16>, %ga: tensor<64xf16>, %c: tensor<64x64xf16>, %p: tensor<2xi32>, %sl: tensor<2xi32>, %ca: !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 16, dtype = f16>):
    %n = weft.rms_norm %a, %ga {epsilon = 1.0e-5 : f64} : (tensor<2x64xf16>, tensor<64xf16>) -> tensor<2x64xf16>
    %y = weft.linear %n, %c : (tensor<2x64xf16>, tensor<64x64xf16>) -> tensor<2x64xf16>
    %s:3 = weft.split %y {sizes = array<i64: 32, 16, 16>} : tensor<2x64xf16> -> (tensor<2x32xf16>, tensor<2x16xf16>, tensor<2x16xf16>)
    %rq = weft.rope %s#0, %p {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<2x32xf16>, tensor<2xi32>) -> tensor<2x32xf16>
    %rk = weft.rope %s#1, %p {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<2x16xf16>, tensor<2xi32>) -> tensor<2x16xf16>
    weft.kv_write %rk, %s#2, %p, %sl, %ca {layer = 2 : i64} : tensor<2x16xf16>, tensor<2x16xf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 1, head_dim = 16, dtype = f16>
    weft.yield %rq : tensor<2x32xf16>
  }
  return %r : tensor<2x32xf16>
}

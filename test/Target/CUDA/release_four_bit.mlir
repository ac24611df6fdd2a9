// Programmatic launch in a module whose projections are 4-bit codes: at
// one token, the kernels between a layer's QKV and O projections (RoPE +
// KV write, decode attention: split and combine) release the next kernel
// at once, like the 4-bit GEMVs. With more tokens, or without a 4-bit
// weight, they wait and release it as their blocks exit.
// RUN: weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 %s | FileCheck %s
// RUN: sed -e 's/bits = 4/bits = 8/' %s | weft-emit-cuda --block-tokens=16 --max-blocks-per-sequence=64 - | FileCheck %s --check-prefix=EIGHT

// CHECK-LABEL: // @rope region 0 "rope_kv_write": 1 step
// CHECK: static constexpr bool RELEASE_EARLY = true;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::ropeKvWriteKernel<Config,
// EIGHT-LABEL: // @rope region 0 "rope_kv_write": 1 step
// EIGHT: static constexpr bool RELEASE_EARLY = false;
// EIGHT-NEXT: };
// EIGHT-NEXT: // entry: weft::kernels::ropeKvWriteKernel<Config,
func.func @rope(%q: tensor<1x64xbf16>, %pos: tensor<1xi32>, %k: tensor<1x32xbf16>, %v: tensor<1x32xbf16>,
                %slots: tensor<1xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>)
    -> tensor<1x64xbf16> {
  %w = weft.weight "layers.3.mlp.down" {quant = #weft.quant<bits = 4, group = 128>} : tensor<64x256xbf16>
  %r = weft.fusion "rope_kv_write" (%q, %pos, %k, %v, %slots, %cache) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 3 : i64, tokens = 1 : i64}}
      : (tensor<1x64xbf16>, tensor<1xi32>, tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<1xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>) -> tensor<1x64xbf16> {
  ^bb0(%a: tensor<1x64xbf16>, %p: tensor<1xi32>, %b: tensor<1x32xbf16>, %c: tensor<1x32xbf16>, %s: tensor<1xi32>,
       %kv: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>):
    %qr = weft.rope %a, %p {head_dim = 16 : i64, theta = 5.0e+05 : f64}
        : (tensor<1x64xbf16>, tensor<1xi32>) -> tensor<1x64xbf16>
    %kr = weft.rope %b, %p {head_dim = 16 : i64, theta = 5.0e+05 : f64}
        : (tensor<1x32xbf16>, tensor<1xi32>) -> tensor<1x32xbf16>
    weft.kv_write %kr, %c, %p, %s, %kv {layer = 3 : i64}
        : tensor<1x32xbf16>, tensor<1x32xbf16>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>
    weft.yield %qr : tensor<1x64xbf16>
  }
  return %r : tensor<1x64xbf16>
}

// CHECK-LABEL: // @rope2 region 0 "rope_kv_write": 1 step
// CHECK: static constexpr bool RELEASE_EARLY = false;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::ropeKvWriteKernel<Config,
func.func @rope2(%q: tensor<2x64xbf16>, %pos: tensor<2xi32>, %k: tensor<2x32xbf16>, %v: tensor<2x32xbf16>,
                %slots: tensor<2xi32>, %cache: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>)
    -> tensor<2x64xbf16> {
  %w = weft.weight "layers.3.mlp.down" {quant = #weft.quant<bits = 4, group = 128>} : tensor<64x256xbf16>
  %r = weft.fusion "rope_kv_write" (%q, %pos, %k, %v, %slots, %cache) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 3 : i64, tokens = 2 : i64}}
      : (tensor<2x64xbf16>, tensor<2xi32>, tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>) -> tensor<2x64xbf16> {
  ^bb0(%a: tensor<2x64xbf16>, %p: tensor<2xi32>, %b: tensor<2x32xbf16>, %c: tensor<2x32xbf16>, %s: tensor<2xi32>,
       %kv: !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>):
    %qr = weft.rope %a, %p {head_dim = 16 : i64, theta = 5.0e+05 : f64}
        : (tensor<2x64xbf16>, tensor<2xi32>) -> tensor<2x64xbf16>
    %kr = weft.rope %b, %p {head_dim = 16 : i64, theta = 5.0e+05 : f64}
        : (tensor<2x32xbf16>, tensor<2xi32>) -> tensor<2x32xbf16>
    weft.kv_write %kr, %c, %p, %s, %kv {layer = 3 : i64}
        : tensor<2x32xbf16>, tensor<2x32xbf16>, tensor<2xi32>, tensor<2xi32>, !weft.kv_cache<layers = 4, kv_heads = 2, head_dim = 16, dtype = bf16>
    weft.yield %qr : tensor<2x64xbf16>
  }
  return %r : tensor<2x64xbf16>
}

// CHECK-LABEL: // @decode region 0 "attention": 2 steps
// CHECK: // step 0: kernel weft_attention_decode_t1_h4_kv2_d16_f32_s{{[0-9]+}}_split
// CHECK: static constexpr bool RELEASE_EARLY = true;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::attention::decodeSplitKernel<Config, false>
// CHECK: // step 1: kernel weft_attention_decode_t1_h4_kv2_d16_f32_s{{[0-9]+}}_combine
// CHECK: static constexpr bool RELEASE_EARLY = true;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::attention::decodeCombineKernel<Config>
// EIGHT-LABEL: // @decode region 0 "attention": 2 steps
// EIGHT: static constexpr bool RELEASE_EARLY = false;
// EIGHT-NEXT: };
// EIGHT-NEXT: // entry: weft::kernels::attention::decodeSplitKernel<Config, false>
// EIGHT: static constexpr bool RELEASE_EARLY = false;
// EIGHT-NEXT: };
// EIGHT-NEXT: // entry: weft::kernels::attention::decodeCombineKernel<Config>
func.func @decode(%q: tensor<1x64xf32>, %pos: tensor<1xi32>, %slots: tensor<1xi32>,
                  %cache: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<1x64xf32> {
  %r = weft.fusion "attention" (%q, %pos, %slots, %cache) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 0 : i64, num_heads = 4 : i64, tokens = 1 : i64}}
      : (tensor<1x64xf32>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<1x64xf32> {
  ^bb0(%a: tensor<1x64xf32>, %b: tensor<1xi32>, %c: tensor<1xi32>, %d: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>):
    %o = weft.attention %a, %b, %c, %d {head_dim = 16 : i64, layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64}
        : (tensor<1x64xf32>, tensor<1xi32>, tensor<1xi32>, !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f32>) -> tensor<1x64xf32>
    weft.yield %o : tensor<1x64xf32>
  }
  return %r : tensor<1x64xf32>
}

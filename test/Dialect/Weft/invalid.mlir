// RUN: weft-opt %s --split-input-file --verify-diagnostics

// Tests that a weight must have a static shape.
func.func @weight_dynamic() {
  // expected-error @+1 {{weight 'w' must have a static shape}}
  %w = weft.weight "w" : tensor<?x64xf16>
  return
}

// -----

// Tests that a weight needs a name.
func.func @weight_unnamed() {
  // expected-error @+1 {{requires a non-empty weight name}}
  %w = weft.weight "" : tensor<64xf16>
  return
}

// -----

// Tests that the embedding result width matches the table.
func.func @embedding_width(%t: tensor<256x64xf16>, %ids: tensor<?xi32>) {
  // expected-error @+1 {{result width 32 does not match the table's hidden size 64}}
  %x = weft.embedding %t, %ids : (tensor<256x64xf16>, tensor<?xi32>) -> tensor<?x32xf16>
  return
}

// -----

// Tests that token counts of activations and ids must agree.
func.func @embedding_tokens(%t: tensor<256x64xf16>, %ids: tensor<4xi32>) {
  // expected-error @+1 {{token count of ids (4) does not match the activations (8)}}
  %x = weft.embedding %t, %ids : (tensor<256x64xf16>, tensor<4xi32>) -> tensor<8x64xf16>
  return
}

// -----

// Tests that ids must be i32.
func.func @embedding_ids_type(%t: tensor<256x64xf16>, %ids: tensor<?xi64>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %x = weft.embedding %t, %ids : (tensor<256x64xf16>, tensor<?xi64>) -> tensor<?x64xf16>
  return
}

// -----

// Tests that the RMSNorm weight matches the row width.
func.func @rms_norm_weight(%x: tensor<?x64xf16>, %w: tensor<32xf16>) {
  // expected-error @+1 {{weight must be tensor<64x...>}}
  %y = weft.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<?x64xf16>, tensor<32xf16>) -> tensor<?x64xf16>
  return
}

// -----

// Tests that epsilon must be positive.
func.func @rms_norm_eps(%x: tensor<?x64xf16>, %w: tensor<64xf16>) {
  // expected-error @+1 {{epsilon must be positive}}
  %y = weft.rms_norm %x, %w {epsilon = 0.0 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  return
}

// -----

// Tests that a head norm's weight is one head wide.
func.func @head_rms_norm_weight(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>) {
  // expected-error @+1 {{weight must be tensor<16x...>}}
  %y = weft.head_rms_norm %x, %w {head_dim = 16 : i64, epsilon = 1.0e-6 : f64} : (tensor<?x64xbf16>, tensor<64xbf16>) -> tensor<?x64xbf16>
  return
}

// -----

// Tests that a head norm's input holds whole heads.
func.func @head_rms_norm_width(%x: tensor<?x72xbf16>, %w: tensor<16xbf16>) {
  // expected-error @+1 {{input width 72 is not a multiple of head_dim 16}}
  %y = weft.head_rms_norm %x, %w {head_dim = 16 : i64, epsilon = 1.0e-6 : f64} : (tensor<?x72xbf16>, tensor<16xbf16>) -> tensor<?x72xbf16>
  return
}

// -----

// Tests that the feature dimension of activations is static.
func.func @rms_norm_dynamic(%x: tensor<?x?xf16>, %w: tensor<64xf16>) {
  // expected-error @+1 {{input must have a static feature dimension}}
  %y = weft.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<?x?xf16>, tensor<64xf16>) -> tensor<?x?xf16>
  return
}

// -----

// Tests that linear checks the reduction dimension.
func.func @linear_k(%x: tensor<?x64xf16>, %w: tensor<128x32xf16>) {
  // expected-error @+1 {{weight 'tensor<128x32xf16>' does not match input width 64}}
  %y = weft.linear %x, %w : (tensor<?x64xf16>, tensor<128x32xf16>) -> tensor<?x128xf16>
  return
}

// -----

// Tests that linear checks the output width.
func.func @linear_n(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>) {
  // expected-error @+1 {{result width 64 does not match the weight's output size 128}}
  %y = weft.linear %x, %w : (tensor<?x64xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>
  return
}

// -----

// Tests that linear checks the bias shape.
func.func @linear_bias(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>, %b: tensor<64xf16>) {
  // expected-error @+1 {{bias must be tensor<128x...>}}
  %y = weft.linear %x, %w, %b : (tensor<?x64xf16>, tensor<128x64xf16>, tensor<64xf16>) -> tensor<?x128xf16>
  return
}

// -----

// Tests that activations must be rank 2.
func.func @linear_rank(%x: tensor<?x4x16xf16>, %w: tensor<128x64xf16>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float values, but got 'tensor<?x4x16xf16>'}}
  %y = weft.linear %x, %w : (tensor<?x4x16xf16>, tensor<128x64xf16>) -> tensor<?x128xf16>
  return
}

// -----

// Tests that rope requires the llama3 parameters.
func.func @rope_llama3(%x: tensor<?x64xf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope_type "llama3" requires 'factor', 'low_freq_factor', 'high_freq_factor' and 'original_max_position_embeddings'}}
  %y = weft.rope %x, %p {head_dim = 16 : i64, theta = 5.0e5 : f64, rope_type = #weft.rope_kind<llama3>, factor = 8.0 : f64}
      : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  return
}

// -----

// Tests that rope rejects unknown scaling types.
func.func @rope_type(%x: tensor<?x64xf16>, %p: tensor<?xi32>) {
  // expected-error @+2 {{expected ::weft::RopeKind to be one of: default, linear, llama3}}
  // expected-error @+1 {{failed to parse Weft_RopeKindAttr parameter 'value'}}
  %y = weft.rope %x, %p {head_dim = 16 : i64, theta = 1.0e4 : f64, rope_type = #weft.rope_kind<yarn>}
      : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  return
}

// -----

// Tests that the width is a whole number of heads.
func.func @rope_heads(%x: tensor<?x60xf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{input width 60 is not a multiple of head_dim 16}}
  %y = weft.rope %x, %p {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x60xf16>, tensor<?xi32>) -> tensor<?x60xf16>
  return
}

// -----

// Tests that head_dim must be even (rotation pairs halves).
func.func @rope_odd(%x: tensor<?x60xf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{head_dim must be even, got 15}}
  %y = weft.rope %x, %p {head_dim = 15 : i64, theta = 1.0e4 : f64} : (tensor<?x60xf16>, tensor<?xi32>) -> tensor<?x60xf16>
  return
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that kv_write checks the layer index against the cache.
func.func @kv_write_layer(%k: tensor<?x32xf16>, %p: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{layer 2 is out of range for a cache of 2 layers}}
  weft.kv_write %k, %k, %p, %p, %c {layer = 2 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that kv_write checks key width against the cache.
func.func @kv_write_width(%k: tensor<?x64xf16>, %p: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{key width 64 does not match the cache's kv_heads * head_dim = 32}}
  weft.kv_write %k, %k, %p, %p, %c {layer = 0 : i64} : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that query heads must be a multiple of KV heads.
func.func @attention_gqa(%q: tensor<?x48xf16>, %p: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{num_heads 3 is not a multiple of num_kv_heads 2}}
  %a = weft.attention %q, %p, %p, %c {layer = 0 : i64, num_heads = 3 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x48xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x48xf16>
  return
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that attention heads must match the cache.
func.func @attention_cache(%q: tensor<?x64xf16>, %p: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{num_kv_heads 4 and head_dim 16 do not match the cache (2, 16)}}
  %a = weft.attention %q, %p, %p, %c {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that a non-positive sliding window is rejected.
func.func @attention_window(%q: tensor<?x64xf16>, %p: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{attribute 'sliding_window' failed to satisfy constraint}}
  %a = weft.attention %q, %p, %p, %c {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64, sliding_window = 0 : i64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return
}

// -----

// Tests that the cache type checks its dimensions.
// expected-error @+1 {{kv_cache dimensions must be positive}}
func.func @cache_dims(%c: !weft.kv_cache<layers = 0, kv_heads = 2, head_dim = 16, dtype = f16>) {
  return
}

// -----

// Tests that elementwise ops need equal types.
// expected-note @+1 {{prior use here}}
func.func @add_types(%a: tensor<?x64xf16>, %b: tensor<?x64xbf16>) {
  // expected-error @+1 {{use of value '%b' expects different type than prior uses}}
  %c = weft.add %a, %b : tensor<?x64xf16>
  return
}

// -----

// Tests that logits match the vocabulary of the head.
func.func @logits_vocab(%x: tensor<?x64xf16>, %w: tensor<256x64xf16>) {
  // expected-error @+1 {{result width 128 does not match the vocabulary size 256}}
  %l = weft.logits %x, %w : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x128xf32>
  return
}

// -----

// Tests that logits are f32.
func.func @logits_f16(%x: tensor<?x64xf16>, %w: tensor<256x64xf16>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 32-bit float values, but got 'tensor<?x256xf16>'}}
  %l = weft.logits %x, %w : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf16>
  return
}

// -----

// Tests that sampling parameters cover every token.
func.func @sample_tokens(%l: tensor<4x256xf32>, %t: tensor<2xf32>, %k: tensor<4xi32>, %p: tensor<4xf32>) {
  // expected-error @+1 {{token count of a per-token operand (2) does not match the activations (4)}}
  %n = weft.sample %l, %t, %k, %p, %p : (tensor<4x256xf32>, tensor<2xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xi32>
  return
}

// -----

// Tests that concatenated weights add up along the axis.
func.func @concat_sum(%a: tensor<64x64xf16>, %b: tensor<32x64xf16>) {
  // expected-error @+1 {{inputs add up to 96 along axis 0, result has 128}}
  %w = weft.weight_concat %a, %b {axis = 0 : i64} : (tensor<64x64xf16>, tensor<32x64xf16>) -> tensor<128x64xf16>
  return
}

// -----

// Tests that concatenated weights agree outside the axis.
func.func @concat_other_dim(%a: tensor<64x64xf16>, %b: tensor<32x32xf16>) {
  // expected-error @+1 {{differs from result 'tensor<96x64xf16>' outside axis 0}}
  %w = weft.weight_concat %a, %b {axis = 0 : i64} : (tensor<64x64xf16>, tensor<32x32xf16>) -> tensor<96x64xf16>
  return
}

// -----

// Tests that split sizes cover the input.
func.func @split_sizes(%x: tensor<?x96xf16>) {
  // expected-error @+1 {{sizes add up to 80, input width is 96}}
  %a, %b = weft.split %x {sizes = array<i64: 64, 16>} : tensor<?x96xf16> -> (tensor<?x64xf16>, tensor<?x16xf16>)
  return
}

// -----

// Tests that a fusion body's arguments mirror its inputs.
func.func @fusion_args(%x: tensor<?x64xf16>) {
  // expected-error @+1 {{body argument type 'tensor<?x32xf16>' does not match input type 'tensor<?x64xf16>'}}
  %r = weft.fusion "silu" (%x) : (tensor<?x64xf16>) -> tensor<?x32xf16> {
  ^bb0(%a: tensor<?x32xf16>):
    %s = weft.silu %a : tensor<?x32xf16>
    weft.yield %s : tensor<?x32xf16>
  }
  return
}

// -----

// Tests that a fusion's yield matches its results.
func.func @fusion_yield(%x: tensor<?x64xf16>) {
  // expected-error @+1 {{weft.yield types do not match the results}}
  %r = weft.fusion "silu" (%x) : (tensor<?x64xf16>) -> tensor<?x32xf16> {
  ^bb0(%a: tensor<?x64xf16>):
    %s = weft.silu %a : tensor<?x64xf16>
    weft.yield %s : tensor<?x64xf16>
  }
  return
}

// -----

// Tests that a fusion region sees nothing from above.
func.func @fusion_isolated(%x: tensor<?x64xf16>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = weft.fusion "silu" () : () -> tensor<?x64xf16> {
    // expected-error @+1 {{using value defined outside the region}}
    %s = weft.silu %x : tensor<?x64xf16>
    weft.yield %s : tensor<?x64xf16>
  }
  return
}

// -----

// Tests that quantized codes are 4 or 8 bits.
func.func @quant_bits() {
  // expected-error @+1 {{#weft.quant: bits must be 4 or 8, got 3}}
  %w = weft.weight "w" {quant = #weft.quant<bits = 3, group = 32>} : tensor<64x64xf16>
  return
}

// -----

// Tests that a quantization group divides the inputs.
func.func @quant_group() {
  // expected-error @+1 {{quantized weight 'w': group 128 does not divide its 64 inputs}}
  %w = weft.weight "w" {quant = #weft.quant<bits = 4, group = 128>} : tensor<64x64xf16>
  return
}

// -----

// Tests that only 4-bit integer codes are stored tiled.
func.func @quant_tiled_bits() {
  // expected-error @+1 {{#weft.quant: only 4-bit integer codes are stored tiled}}
  %w = weft.weight "w" {quant = #weft.quant<bits = 8, group = 128, tiled = true>} : tensor<64x128xf16>
  return
}

// -----

// Tests that tiled codes fill whole tiles of 16 rows and 128 inputs.
func.func @quant_tiled_shape() {
  // expected-error @+1 {{quantized weight 'w': 24 x 128 codes cannot be stored in tiles of 16 rows and 128 inputs}}
  %w = weft.weight "w" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<24x128xf16>
  return
}

// -----

// Tests that a model's dimensions are positive.
// expected-error @+1 {{#weft.model: num_kv_heads must be positive, got 0}}
module attributes {weft.model = #weft.model<architecture = "LlamaForCausalLM", name = "m", dtype = f16, hidden_size = 64, intermediate_size = 128, num_layers = 2, num_heads = 4, num_kv_heads = 0, head_dim = 16, vocab_size = 256, max_position_embeddings = 256, rms_norm_eps = 1.0e-05 : f64, rope_theta = 1.0e+04 : f64, rope_type = default, tie_word_embeddings = false, qkv_bias = false, o_bias = false, mlp_bias = false>} {
}

// -----

// Tests that an attention soft cap is positive.
!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>
func.func @attention_softcap(%q: tensor<?x64xf16>, %pos: tensor<?xi32>, %cache: !cache) {
  // expected-error @+1 {{softcap must be positive}}
  %a = weft.attention %q, %pos, %pos, %cache {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64, softcap = 0.0 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return
}

// -----

// Tests that a logits soft cap is positive.
func.func @logits_softcap(%x: tensor<?x64xf16>, %w: tensor<256x64xf16>) {
  // expected-error @+1 {{softcap must be positive}}
  %l = weft.logits %x, %w {softcap = -30.0 : f64} : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf32>
  return
}

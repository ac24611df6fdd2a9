// RUN: weft-opt %s | FileCheck %s
// RUN: weft-opt %s | weft-opt | FileCheck %s
// RUN: weft-opt %s --mlir-print-op-generic | weft-opt | FileCheck %s

// Tests that every weft op round-trips through the printer and parser.

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// CHECK-LABEL: func.func @decoder_layer
// CHECK-SAME: !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>
func.func @decoder_layer(%ids: tensor<?xi32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>,
                         %cache: !cache) -> (tensor<?x256xf32>, tensor<?xi32>) {
  // CHECK: %[[TABLE:.+]] = weft.weight "model.embed_tokens.weight" : tensor<256x64xf16>
  %table = weft.weight "model.embed_tokens.weight" : tensor<256x64xf16>
  // CHECK: %[[X:.+]] = weft.embedding %[[TABLE]], %{{.+}} : (tensor<256x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  %x = weft.embedding %table, %ids : (tensor<256x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  %wn = weft.weight "model.layers.0.input_layernorm.weight" : tensor<64xf16>
  // CHECK: weft.rms_norm %[[X]], %{{.+}} {epsilon = 1.000000e-05 : f64}
  %n = weft.rms_norm %x, %wn {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %wq = weft.weight "q.weight" : tensor<64x64xf16>
  %bq = weft.weight "q.bias" : tensor<64xf16>
  %wk = weft.weight "k.weight" : tensor<32x64xf16>
  %wv = weft.weight "v.weight" : tensor<32x64xf16>
  // CHECK: weft.linear %{{.+}}, %{{.+}}, %{{.+}} : (tensor<?x64xf16>, tensor<64x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %q = weft.linear %n, %wq, %bq : (tensor<?x64xf16>, tensor<64x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  // CHECK: weft.linear %{{.+}}, %{{.+}} : (tensor<?x64xf16>, tensor<32x64xf16>) -> tensor<?x32xf16>
  %k = weft.linear %n, %wk : (tensor<?x64xf16>, tensor<32x64xf16>) -> tensor<?x32xf16>
  %v = weft.linear %n, %wv : (tensor<?x64xf16>, tensor<32x64xf16>) -> tensor<?x32xf16>
  %wqn = weft.weight "q_norm.weight" : tensor<16xf16>
  // CHECK: weft.head_rms_norm %{{.+}}, %{{.+}} {epsilon = 9.9999999999999995E-7 : f64, head_dim = 16 : i64} : (tensor<?x32xf16>, tensor<16xf16>) -> tensor<?x32xf16>
  %kn = weft.head_rms_norm %k, %wqn {head_dim = 16 : i64, epsilon = 1.0e-06 : f64} : (tensor<?x32xf16>, tensor<16xf16>) -> tensor<?x32xf16>
  // CHECK: weft.gelu_tanh %{{.+}} : tensor<?x32xf16>
  %kg = weft.gelu_tanh %kn : tensor<?x32xf16>
  // CHECK: weft.rms_norm %{{.+}}, %{{.+}} {epsilon = 1.000000e-05 : f64, weight_offset = 1.000000e+00 : f64}
  %gn = weft.rms_norm %x, %wn {epsilon = 1.0e-05 : f64, weight_offset = 1.0 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  // CHECK: weft.embedding %[[TABLE]], %{{.+}} {scale = 8.000000e+00 : f64}
  %xs = weft.embedding %table, %ids {scale = 8.0 : f64} : (tensor<256x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  // CHECK: weft.rope {{.+}} {factor = 8.000000e+00 : f64, head_dim = 16 : i64, high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, original_max_position_embeddings = 8192 : i64, rope_type = #weft.rope_kind<llama3>, theta = 5.000000e+05 : f64}
  %qr = weft.rope %q, %pos {head_dim = 16 : i64, theta = 5.0e5 : f64, rope_type = #weft.rope_kind<llama3>,
          factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64,
          original_max_position_embeddings = 8192 : i64} : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  // CHECK: weft.rope {{.+}} {head_dim = 16 : i64, theta = 1.000000e+04 : f64}
  %kr = weft.rope %k, %pos {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
  // CHECK: weft.kv_write %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {layer = 1 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !weft.kv_cache
  weft.kv_write %kr, %v, %pos, %slots, %cache {layer = 1 : i64}
      : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
  // CHECK: weft.attention {{.+}} {head_dim = 16 : i64, layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64, sliding_window = 4096 : i64}
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 1 : i64, num_heads = 4 : i64,
          num_kv_heads = 2 : i64, head_dim = 16 : i64, scale = 0.25 : f64, sliding_window = 4096 : i64}
      : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  // CHECK: weft.add %{{.+}}, %{{.+}} : tensor<?x64xf16>
  %h = weft.add %x, %a : tensor<?x64xf16>
  // CHECK: weft.silu %{{.+}} : tensor<?x64xf16>
  %s = weft.silu %h : tensor<?x64xf16>
  // CHECK: weft.mul %{{.+}}, %{{.+}} : tensor<?x64xf16>
  %m = weft.mul %s, %h : tensor<?x64xf16>
  // CHECK: %[[L:.+]] = weft.logits %{{.+}}, %[[TABLE]] : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf32>
  %l = weft.logits %m, %table : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf32>
  // CHECK: weft.argmax %[[L]] : tensor<?x256xf32> -> tensor<?xi32>
  %next = weft.argmax %l : tensor<?x256xf32> -> tensor<?xi32>
  return %l, %next : tensor<?x256xf32>, tensor<?xi32>
}


// CHECK-LABEL: func.func @sampling
func.func @sampling(%l: tensor<4x32000xf32>, %t: tensor<4xf32>, %k: tensor<4xi32>,
                    %p: tensor<4xf32>, %u: tensor<4xf32>) -> tensor<4xi32> {
  // CHECK: weft.sample %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : (tensor<4x32000xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xi32>
  %next = weft.sample %l, %t, %k, %p, %u
      : (tensor<4x32000xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xi32>
  return %next : tensor<4xi32>
}

// CHECK-LABEL: func.func @fusion_regions
func.func @fusion_regions(%x: tensor<?x64xf16>, %wn: tensor<64xf16>, %wq: tensor<64x64xf16>,
                          %wk: tensor<32x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
  // CHECK: %[[W:.+]] = weft.weight_concat %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<64x64xf16>, tensor<32x64xf16>) -> tensor<96x64xf16>
  %w = weft.weight_concat %wq, %wk {axis = 0 : i64} : (tensor<64x64xf16>, tensor<32x64xf16>) -> tensor<96x64xf16>
  // CHECK: %[[R:.+]]:2 = weft.fusion "rms_norm_linear" (%{{.+}}, %{{.+}}, %[[W]]) {dims = {tokens = 1 : i64}} : (tensor<?x64xf16>, tensor<64xf16>, tensor<96x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
  // CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<?x64xf16>, %{{.+}}: tensor<64xf16>, %{{.+}}: tensor<96x64xf16>):
  // CHECK: weft.split %{{.+}} {sizes = array<i64: 64, 32>} : tensor<?x96xf16> -> (tensor<?x64xf16>, tensor<?x32xf16>)
  // CHECK: weft.yield %{{.+}}, %{{.+}} : tensor<?x64xf16>, tensor<?x32xf16>
  %r:2 = weft.fusion "rms_norm_linear" (%x, %wn, %w) {dims = {tokens = 1 : i64}}
      : (tensor<?x64xf16>, tensor<64xf16>, tensor<96x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<96x64xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
    %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<96x64xf16>) -> tensor<?x96xf16>
    %q, %k = weft.split %y {sizes = array<i64: 64, 32>} : tensor<?x96xf16> -> (tensor<?x64xf16>, tensor<?x32xf16>)
    weft.yield %q, %k : tensor<?x64xf16>, tensor<?x32xf16>
  }
  return %r#0, %r#1 : tensor<?x64xf16>, tensor<?x32xf16>
}

// A quantized weight and the model attribute round-trip.
// CHECK-LABEL: func.func @quantized_weight
// CHECK: weft.weight "w" {quant = #weft.quant<bits = 4, group = 32>} : tensor<64x64xf16>
func.func @quantized_weight() -> tensor<64x64xf16> {
  %w = weft.weight "w" {quant = #weft.quant<bits = 4, group = 32>} : tensor<64x64xf16>
  return %w : tensor<64x64xf16>
}


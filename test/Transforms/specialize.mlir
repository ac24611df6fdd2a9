// RUN: weft-opt %s --split-input-file --verify-diagnostics --weft-specialize='max-batch=3 prefill-chunks=16' | FileCheck %s
// RUN: weft-opt %s --split-input-file --verify-diagnostics --weft-specialize='decode-buckets=8' | FileCheck %s --check-prefix=EXPLICIT

!cache = !weft.kv_cache<layers = 1, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that @forward is replaced by static variants per bucket (powers of
// two below max-batch, then max-batch) and that each region records its
// token count and model dimensions.

// CHECK-NOT: func.func @forward
// CHECK-LABEL: func.func @decode_b1(%{{.+}}: tensor<1xi32>, %{{.+}}: tensor<1xi32>, %{{.+}}: tensor<1xi32>, %{{.+}}: !weft.kv_cache<{{.+}}>) -> tensor<1x64xf16> attributes {weft.tokens = 1 : i64}
// CHECK: weft.fusion "rms_norm_linear" ({{.+}}) {dims = {hidden = 64 : i64, k = 64 : i64, n = 64 : i64, tokens = 1 : i64}} : (tensor<1x64xf16>, tensor<64xf16>, tensor<64x64xf16>) -> tensor<1x64xf16>
// CHECK: weft.rms_norm {{.+}} : (tensor<1x64xf16>, tensor<64xf16>) -> tensor<1x64xf16>
// CHECK: weft.fusion "attention" ({{.+}}) {dims = {head_dim = 16 : i64, kv_heads = 2 : i64, layer = 0 : i64, num_heads = 4 : i64, tokens = 1 : i64}}
// CHECK-LABEL: func.func @decode_b2
// CHECK-SAME: tensor<2xi32>
// CHECK: tokens = 2 : i64
// CHECK-LABEL: func.func @decode_b3
// CHECK-SAME: -> tensor<3x64xf16>
// CHECK-LABEL: func.func @prefill_c16
// CHECK-SAME: -> tensor<16x64xf16> attributes {weft.tokens = 16 : i64}
// CHECK: tokens = 16 : i64

// Without prefill chunks given: one that holds the largest decode batch and
// 64 prompt tokens (rounded up to 64), and 512.
// EXPLICIT-NOT: func.func @decode_b1
// EXPLICIT: func.func @decode_b8
// EXPLICIT: func.func @prefill_c128
// EXPLICIT: func.func @prefill_c512
module {
  func.func @forward(%ids: tensor<?xi32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>, %cache: !cache) -> tensor<?x64xf16> {
    %g = weft.weight "norm.weight" : tensor<64xf16>
    %w = weft.weight "q.weight" : tensor<64x64xf16>
    %t = weft.weight "embed.weight" : tensor<256x64xf16>
    %x = weft.embedding %t, %ids : (tensor<256x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
    %q = weft.fusion "rms_norm_linear" (%x, %g, %w) : (tensor<?x64xf16>, tensor<64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16> {
    ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<64x64xf16>):
      %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
      %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
      weft.yield %y : tensor<?x64xf16>
    }
    %r = weft.fusion "attention" (%q, %pos, %slots, %cache) : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16> {
    ^bb0(%a: tensor<?x64xf16>, %b: tensor<?xi32>, %c: tensor<?xi32>, %d: !cache):
      %o = weft.attention %a, %b, %c, %d {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
            head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
      weft.yield %o : tensor<?x64xf16>
    }
    return %r : tensor<?x64xf16>
  }
}

// -----

// Tests that a module without @forward is rejected with a diagnostic.

// expected-error @+1 {{weft-specialize: no @forward function to specialize}}
module {
  func.func @other() {
    return
  }
}

// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-projection-rope))' | FileCheck %s

!cache = !weft.kv_cache<layers = 2, kv_heads = 1, head_dim = 32, dtype = f16>

// Tests that the QKV projection region and the rope/KV-write region that
// alone consumes its three parts become one region, which takes the
// projection's inputs and the positions, slots and cache, and yields only
// the rotated query.

// CHECK-LABEL: func.func @layer
// CHECK: %[[QR:.+]] = weft.fusion "rms_norm_linear_rope_kv_write" (%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) : (tensor<?x64xf16>, tensor<64xf16>, tensor<128x64xf16>, tensor<?xi32>, tensor<?xi32>, !weft.kv_cache<{{.+}}>) -> tensor<?x64xf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: weft.rms_norm
// CHECK-NEXT: weft.linear
// CHECK-NEXT: %[[S:.+]]:3 = weft.split
// CHECK-NEXT: %[[R:.+]] = weft.rope %[[S]]#0
// CHECK-NEXT: %[[K:.+]] = weft.rope %[[S]]#1
// CHECK-NEXT: weft.kv_write %[[K]], %[[S]]#2
// CHECK-NEXT: weft.yield %[[R]] : tensor<?x64xf16>
// CHECK: weft.attention %[[QR]], %arg3, %arg4, %arg5

func.func @layer(%x: tensor<?x64xf16>, %g: tensor<64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>,
    %slots: tensor<?xi32>, %cache: !cache) -> (tensor<?x64xf16>) {
  %qkv:3 = weft.fusion "rms_norm_linear" (%x, %g, %w) : (tensor<?x64xf16>, tensor<64xf16>, tensor<128x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<128x64xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-5 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
    %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<128x64xf16>) -> tensor<?x128xf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<?x128xf16> -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  }
  %qr = weft.fusion "rope_kv_write" (%qkv#0, %pos, %qkv#1, %qkv#2, %slots, %cache) : (tensor<?x64xf16>, tensor<?xi32>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache) -> tensor<?x64xf16> {
  ^bb0(%q: tensor<?x64xf16>, %p: tensor<?xi32>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %sl: tensor<?xi32>, %ca: !cache):
    %r = weft.rope %q, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
    %kr = weft.rope %k, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
    weft.kv_write %kr, %v, %p, %sl, %ca {layer = 1 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
    weft.yield %r : tensor<?x64xf16>
  }
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 1 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64,
        head_dim = 32 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 1, head_dim = 32, dtype = f16>

// Tests that per-head norms (Qwen3) keep the regions apart: a norm needs
// the whole head before a pair can be rotated.

// CHECK-LABEL: func.func @head_norms
// CHECK: weft.fusion "rms_norm_linear"
// CHECK: weft.fusion "rope_kv_write"

func.func @head_norms(%x: tensor<?x64xf16>, %g: tensor<64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>,
    %slots: tensor<?xi32>, %cache: !cache, %g2: tensor<32xf16>) -> (tensor<?x64xf16>) {
  %qkv:3 = weft.fusion "rms_norm_linear" (%x, %g, %w) : (tensor<?x64xf16>, tensor<64xf16>, tensor<128x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<128x64xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-5 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
    %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<128x64xf16>) -> tensor<?x128xf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<?x128xf16> -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  }
  %qr = weft.fusion "rope_kv_write" (%qkv#0, %pos, %qkv#1, %qkv#2, %slots, %cache, %g2) : (tensor<?x64xf16>, tensor<?xi32>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache, tensor<32xf16>) -> tensor<?x64xf16> {
  ^bb0(%q: tensor<?x64xf16>, %p: tensor<?xi32>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %sl: tensor<?xi32>, %ca: !cache, %gn: tensor<32xf16>):
    %r = weft.rope %q, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
    %kn = weft.head_rms_norm %k, %gn {head_dim = 32 : i64, epsilon = 1.0e-6 : f64} : (tensor<?x32xf16>, tensor<32xf16>) -> tensor<?x32xf16>
    %kr = weft.rope %kn, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
    weft.kv_write %kr, %v, %p, %sl, %ca {layer = 1 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
    weft.yield %r : tensor<?x64xf16>
  }
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 1 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64,
        head_dim = 32 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 1, head_dim = 16, dtype = f16>

// Tests that heads narrower than 32 keep the regions apart: a 16-row GEMV
// tile would cross half a head.

// CHECK-LABEL: func.func @narrow_heads
// CHECK: weft.fusion "rms_norm_linear"
// CHECK: weft.fusion "rope_kv_write"

func.func @narrow_heads(%x: tensor<?x64xf16>, %g: tensor<64xf16>, %w: tensor<64x64xf16>, %pos: tensor<?xi32>,
    %slots: tensor<?xi32>, %cache: !cache) -> (tensor<?x32xf16>) {
  %qkv:3 = weft.fusion "rms_norm_linear" (%x, %g, %w) : (tensor<?x64xf16>, tensor<64xf16>, tensor<64x64xf16>) -> (tensor<?x32xf16>, tensor<?x16xf16>, tensor<?x16xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<64x64xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-5 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
    %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
    %s:3 = weft.split %y {sizes = array<i64: 32, 16, 16>} : tensor<?x64xf16> -> (tensor<?x32xf16>, tensor<?x16xf16>, tensor<?x16xf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<?x32xf16>, tensor<?x16xf16>, tensor<?x16xf16>
  }
  %qr = weft.fusion "rope_kv_write" (%qkv#0, %pos, %qkv#1, %qkv#2, %slots, %cache) : (tensor<?x32xf16>, tensor<?xi32>, tensor<?x16xf16>, tensor<?x16xf16>, tensor<?xi32>, !cache) -> tensor<?x32xf16> {
  ^bb0(%q: tensor<?x32xf16>, %p: tensor<?xi32>, %k: tensor<?x16xf16>, %v: tensor<?x16xf16>, %sl: tensor<?xi32>, %ca: !cache):
    %r = weft.rope %q, %p {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
    %kr = weft.rope %k, %p {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x16xf16>, tensor<?xi32>) -> tensor<?x16xf16>
    weft.kv_write %kr, %v, %p, %sl, %ca {layer = 1 : i64} : tensor<?x16xf16>, tensor<?x16xf16>, tensor<?xi32>, tensor<?xi32>, !cache
    weft.yield %r : tensor<?x32xf16>
  }
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 1 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x32xf16>
  return %a : tensor<?x32xf16>
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 1, head_dim = 32, dtype = f16>

// Tests that a part also used outside the rope region (the values,
// returned) keeps the projection whole.

// CHECK-LABEL: func.func @values_used_twice
// CHECK: weft.fusion "rms_norm_linear"
// CHECK: weft.fusion "rope_kv_write"

func.func @values_used_twice(%x: tensor<?x64xf16>, %g: tensor<64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>,
    %slots: tensor<?xi32>, %cache: !cache) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
  %qkv:3 = weft.fusion "rms_norm_linear" (%x, %g, %w) : (tensor<?x64xf16>, tensor<64xf16>, tensor<128x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<128x64xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-5 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
    %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<128x64xf16>) -> tensor<?x128xf16>
    %s:3 = weft.split %y {sizes = array<i64: 64, 32, 32>} : tensor<?x128xf16> -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  }
  %qr = weft.fusion "rope_kv_write" (%qkv#0, %pos, %qkv#1, %qkv#2, %slots, %cache) : (tensor<?x64xf16>, tensor<?xi32>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache) -> tensor<?x64xf16> {
  ^bb0(%q: tensor<?x64xf16>, %p: tensor<?xi32>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %sl: tensor<?xi32>, %ca: !cache):
    %r = weft.rope %q, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
    %kr = weft.rope %k, %p {head_dim = 32 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
    weft.kv_write %kr, %v, %p, %sl, %ca {layer = 1 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
    weft.yield %r : tensor<?x64xf16>
  }
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 1 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64,
        head_dim = 32 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return %a, %qkv#2 : tensor<?x64xf16>, tensor<?x32xf16>
}

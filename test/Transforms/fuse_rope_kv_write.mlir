// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-rope-kv-write))' | FileCheck %s

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that the ropes of Q and K and the cache write of a layer become one
// region that yields the rotated query for the attention.

// CHECK-LABEL: func.func @layer
// CHECK: %[[QR:.+]] = weft.fusion "rope_kv_write" (%arg0, %arg3, %arg1, %arg2, %arg4, %arg5) : (tensor<?x64xf16>, tensor<?xi32>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !weft.kv_cache<{{.+}}>) -> tensor<?x64xf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[R:.+]] = weft.rope
// CHECK-NEXT: weft.rope
// CHECK-NEXT: weft.kv_write
// CHECK-NEXT: weft.yield %[[R]]
// CHECK: weft.attention %[[QR]], %arg3, %arg4, %arg5
func.func @layer(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %pos: tensor<?xi32>,
                 %slots: tensor<?xi32>, %cache: !cache) -> tensor<?x64xf16> {
  %qr = weft.rope %q, %pos {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  %kr = weft.rope %k, %pos {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
  weft.kv_write %kr, %v, %pos, %slots, %cache {layer = 1 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that a rotated key that is also used elsewhere keeps its rope out of
// the region.

// CHECK-LABEL: func.func @key_used_twice
// CHECK-NOT: weft.fusion
func.func @key_used_twice(%k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %pos: tensor<?xi32>,
                          %cache: !cache) -> tensor<?x32xf16> {
  %kr = weft.rope %k, %pos {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
  weft.kv_write %kr, %v, %pos, %pos, %cache {layer = 0 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
  return %kr : tensor<?x32xf16>
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that a cache read between the key rope and the write blocks the
// fusion: moving the write past it would change what the read sees.

// CHECK-LABEL: func.func @read_in_between
// CHECK-NOT: weft.fusion
func.func @read_in_between(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>,
                           %pos: tensor<?xi32>, %cache: !cache) -> tensor<?x64xf16> {
  %kr = weft.rope %k, %pos {head_dim = 16 : i64, theta = 1.0e4 : f64} : (tensor<?x32xf16>, tensor<?xi32>) -> tensor<?x32xf16>
  %a = weft.attention %q, %pos, %pos, %cache {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  %b = weft.attention %a, %pos, %pos, %cache {layer = 1 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x64xf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xf16>
  weft.kv_write %kr, %v, %pos, %pos, %cache {layer = 0 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
  return %b : tensor<?x64xf16>
}

// -----

!cache = !weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = bf16>

// Tests that the per-head norms of Q and K (Qwen3) join the region of the
// ropes they feed, their weights becoming region inputs.

// CHECK-LABEL: func.func @head_norms
// CHECK: %[[QR:.+]] = weft.fusion "rope_kv_write" (%arg0, %arg6, %arg1, %arg7, %arg3, %arg2, %arg4, %arg5) : (tensor<?x64xbf16>, tensor<16xbf16>, tensor<?x32xbf16>, tensor<16xbf16>, tensor<?xi32>, tensor<?x32xbf16>, tensor<?xi32>, !weft.kv_cache<{{.+}}>) -> tensor<?x64xbf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[QN:.+]] = weft.head_rms_norm
// CHECK-NEXT: %[[KN:.+]] = weft.head_rms_norm
// CHECK-NEXT: %[[R:.+]] = weft.rope %[[QN]]
// CHECK-NEXT: weft.rope %[[KN]]
// CHECK-NEXT: weft.kv_write
// CHECK-NEXT: weft.yield %[[R]]
// CHECK: weft.attention %[[QR]]
func.func @head_norms(%q: tensor<?x64xbf16>, %k: tensor<?x32xbf16>, %v: tensor<?x32xbf16>, %pos: tensor<?xi32>,
                      %slots: tensor<?xi32>, %cache: !cache, %wq: tensor<16xbf16>, %wk: tensor<16xbf16>) -> tensor<?x64xbf16> {
  %qn = weft.head_rms_norm %q, %wq {head_dim = 16 : i64, epsilon = 1.0e-6 : f64} : (tensor<?x64xbf16>, tensor<16xbf16>) -> tensor<?x64xbf16>
  %kn = weft.head_rms_norm %k, %wk {head_dim = 16 : i64, epsilon = 1.0e-6 : f64} : (tensor<?x32xbf16>, tensor<16xbf16>) -> tensor<?x32xbf16>
  %qr = weft.rope %qn, %pos {head_dim = 16 : i64, theta = 1.0e6 : f64} : (tensor<?x64xbf16>, tensor<?xi32>) -> tensor<?x64xbf16>
  %kr = weft.rope %kn, %pos {head_dim = 16 : i64, theta = 1.0e6 : f64} : (tensor<?x32xbf16>, tensor<?xi32>) -> tensor<?x32xbf16>
  weft.kv_write %kr, %v, %pos, %slots, %cache {layer = 0 : i64} : tensor<?x32xbf16>, tensor<?x32xbf16>, tensor<?xi32>, tensor<?xi32>, !cache
  %a = weft.attention %qr, %pos, %slots, %cache {layer = 0 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
        head_dim = 16 : i64, scale = 0.25 : f64} : (tensor<?x64xbf16>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x64xbf16>
  return %a : tensor<?x64xbf16>
}

// RUN: weft-opt %s --split-input-file --canonicalize --cse | FileCheck %s

// Tests that duplicate weight references merge and single-input transforms
// fold away.

// CHECK-LABEL: func.func @weights
// CHECK-COUNT-1: weft.weight "w"
// CHECK-NOT: weft.weight_concat
// CHECK-NOT: weft.split
func.func @weights(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %a = weft.weight "w" : tensor<64x64xf16>
  %b = weft.weight "w" : tensor<64x64xf16>
  %c = weft.weight_concat %a {axis = 0 : i64} : (tensor<64x64xf16>) -> tensor<64x64xf16>
  %y = weft.linear %x, %c : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  %s = weft.split %y {sizes = array<i64: 64>} : tensor<?x64xf16> -> (tensor<?x64xf16>)
  %z = weft.linear %x, %b : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  return %s, %z : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Tests that a region drops unused results, unused inputs and inputs passed
// twice, and that a pure region with no used result disappears.

// CHECK-LABEL: func.func @region_interface
// CHECK: %[[R:.+]] = weft.fusion "k" (%arg0) : (tensor<?x64xf16>) -> tensor<?x64xf16> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<?x64xf16>):
// CHECK-NEXT: %[[M:.+]] = weft.mul %[[A]], %[[A]]
// CHECK-NEXT: weft.yield %[[M]] : tensor<?x64xf16>
// CHECK-NOT: weft.fusion
// CHECK: return %[[R]]
func.func @region_interface(%x: tensor<?x64xf16>, %y: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %r:2 = weft.fusion "k" (%x, %x, %y) : (tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<?x64xf16>, %c: tensor<?x64xf16>):
    %m = weft.mul %a, %b : tensor<?x64xf16>
    %s = weft.silu %a : tensor<?x64xf16>
    weft.yield %m, %s : tensor<?x64xf16>, tensor<?x64xf16>
  }
  %dead = weft.fusion "dead" (%y) : (tensor<?x64xf16>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x64xf16>):
    %s = weft.silu %a : tensor<?x64xf16>
    weft.yield %s : tensor<?x64xf16>
  }
  return %r#0 : tensor<?x64xf16>
}

// -----

!cache = !weft.kv_cache<layers = 1, kv_heads = 2, head_dim = 16, dtype = f16>

// Tests that a region with side effects stays even when no result is used.

// CHECK-LABEL: func.func @effects_stay
// CHECK: weft.fusion "write"
func.func @effects_stay(%k: tensor<?x32xf16>, %pos: tensor<?xi32>, %cache: !cache) {
  weft.fusion "write" (%k, %pos, %cache) : (tensor<?x32xf16>, tensor<?xi32>, !cache) -> () {
  ^bb0(%a: tensor<?x32xf16>, %b: tensor<?xi32>, %c: !cache):
    weft.kv_write %a, %a, %b, %b, %c {layer = 0 : i64} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, tensor<?xi32>, !cache
    weft.yield
  }
  return
}

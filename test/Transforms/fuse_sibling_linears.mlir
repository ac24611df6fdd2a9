// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-sibling-linears))' | FileCheck %s

// Tests that Q, K and V projections of one input merge into one projection
// over concatenated weights and biases, split back in order.

// CHECK-LABEL: func.func @qkv_with_bias
// CHECK-DAG: %[[WQ:.+]] = weft.weight "q.weight"
// CHECK-DAG: %[[WK:.+]] = weft.weight "k.weight"
// CHECK-DAG: %[[BQ:.+]] = weft.weight "q.bias"
// CHECK-DAG: %[[BK:.+]] = weft.weight "k.bias"
// CHECK: %[[W:.+]] = weft.weight_concat %[[WQ]], %[[WK]] {axis = 0 : i64} : (tensor<64x64xf16>, tensor<32x64xf16>) -> tensor<96x64xf16>
// CHECK: %[[B:.+]] = weft.weight_concat %[[BQ]], %[[BK]] {axis = 0 : i64} : (tensor<64xf16>, tensor<32xf16>) -> tensor<96xf16>
// CHECK: %[[Y:.+]] = weft.linear %arg0, %[[W]], %[[B]] : (tensor<?x64xf16>, tensor<96x64xf16>, tensor<96xf16>) -> tensor<?x96xf16>
// CHECK: %[[S:.+]]:2 = weft.split %[[Y]] {sizes = array<i64: 64, 32>}
// CHECK-NOT: weft.linear
// CHECK: return %[[S]]#0, %[[S]]#1
func.func @qkv_with_bias(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
  %wq = weft.weight "q.weight" : tensor<64x64xf16>
  %bq = weft.weight "q.bias" : tensor<64xf16>
  %q = weft.linear %x, %wq, %bq : (tensor<?x64xf16>, tensor<64x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %wk = weft.weight "k.weight" : tensor<32x64xf16>
  %bk = weft.weight "k.bias" : tensor<32xf16>
  %k = weft.linear %x, %wk, %bk : (tensor<?x64xf16>, tensor<32x64xf16>, tensor<32xf16>) -> tensor<?x32xf16>
  return %q, %k : tensor<?x64xf16>, tensor<?x32xf16>
}

// -----

// Tests that projections of different inputs stay apart.

// CHECK-LABEL: func.func @different_inputs
// CHECK-NOT: weft.weight_concat
// CHECK-COUNT-2: weft.linear
func.func @different_inputs(%x: tensor<?x64xf16>, %y: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %w1 = weft.weight "a.weight" : tensor<64x64xf16>
  %w2 = weft.weight "b.weight" : tensor<64x64xf16>
  %a = weft.linear %x, %w1 : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  %b = weft.linear %y, %w2 : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  return %a, %b : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Tests that siblings where only one has a bias do not merge.

// CHECK-LABEL: func.func @bias_mismatch
// CHECK-NOT: weft.weight_concat
// CHECK-COUNT-2: weft.linear
func.func @bias_mismatch(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %w1 = weft.weight "a.weight" : tensor<64x64xf16>
  %b1 = weft.weight "a.bias" : tensor<64xf16>
  %w2 = weft.weight "b.weight" : tensor<64x64xf16>
  %a = weft.linear %x, %w1, %b1 : (tensor<?x64xf16>, tensor<64x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %b = weft.linear %x, %w2 : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  return %a, %b : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Tests that siblings with weights of different dtypes do not merge.

// CHECK-LABEL: func.func @dtype_mismatch
// CHECK-NOT: weft.weight_concat
func.func @dtype_mismatch(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %w1 = weft.weight "a.weight" : tensor<64x64xf16>
  %w2 = weft.weight "b.weight" : tensor<64x64xi8>
  %a = weft.linear %x, %w1 : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  %b = weft.linear %x, %w2 : (tensor<?x64xf16>, tensor<64x64xi8>) -> tensor<?x64xf16>
  return %a, %b : tensor<?x64xf16>, tensor<?x64xf16>
}

// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-residual-add))' | FileCheck %s

// Tests that a residual add becomes the epilogue of the projection.

// CHECK-LABEL: func.func @o_proj_residual
// CHECK: %[[H:.+]] = weft.fusion "linear_residual" (%arg1, %{{.+}}, %arg0) : (tensor<?x64xf16>, tensor<64x64xf16>, tensor<?x64xf16>) -> tensor<?x64xf16> {
// CHECK-NEXT: ^bb0(%[[A:.+]]: tensor<?x64xf16>, %[[W:.+]]: tensor<64x64xf16>, %[[X:.+]]: tensor<?x64xf16>):
// CHECK-NEXT: %[[O:.+]] = weft.linear %[[A]], %[[W]]
// CHECK-NEXT: %[[S:.+]] = weft.add %[[X]], %[[O]]
// CHECK-NEXT: weft.yield %[[S]]
// CHECK: return %[[H]]
func.func @o_proj_residual(%x: tensor<?x64xf16>, %a: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %w = weft.weight "o.weight" : tensor<64x64xf16>
  %o = weft.linear %a, %w : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  %h = weft.add %x, %o : tensor<?x64xf16>
  return %h : tensor<?x64xf16>
}

// -----

// Tests that a projection whose output is also returned is not fused: the
// add would otherwise hide a value someone still needs.

// CHECK-LABEL: func.func @projection_used_twice
// CHECK-NOT: weft.fusion
func.func @projection_used_twice(%x: tensor<?x64xf16>, %a: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %w = weft.weight "o.weight" : tensor<64x64xf16>
  %o = weft.linear %a, %w : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  %h = weft.add %x, %o : tensor<?x64xf16>
  return %h, %o : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Tests that an add of two non-projections stays as it is.

// CHECK-LABEL: func.func @plain_add
// CHECK-NOT: weft.fusion
func.func @plain_add(%x: tensor<?x64xf16>, %y: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %h = weft.add %x, %y : tensor<?x64xf16>
  return %h : tensor<?x64xf16>
}

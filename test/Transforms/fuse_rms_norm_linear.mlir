// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-rms-norm-linear))' | FileCheck %s

// Tests that an RMSNorm with one consuming projection, and the split after
// it, become one region.

// CHECK-LABEL: func.func @norm_linear_split
// CHECK: %[[R:.+]]:2 = weft.fusion "rms_norm_linear" (%arg0, %{{.+}}, %{{.+}}) : (tensor<?x64xf16>, tensor<64xf16>, tensor<96x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
// CHECK-NEXT: ^bb0(%[[X:.+]]: tensor<?x64xf16>, %[[G:.+]]: tensor<64xf16>, %[[W:.+]]: tensor<96x64xf16>):
// CHECK-NEXT: %[[N:.+]] = weft.rms_norm %[[X]], %[[G]]
// CHECK-NEXT: %[[Y:.+]] = weft.linear %[[N]], %[[W]]
// CHECK-NEXT: %[[S:.+]]:2 = weft.split %[[Y]]
// CHECK-NEXT: weft.yield %[[S]]#0, %[[S]]#1
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @norm_linear_split(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>) {
  %g = weft.weight "norm.weight" : tensor<64xf16>
  %w = weft.weight "qk.weight" : tensor<96x64xf16>
  %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %y = weft.linear %n, %w : (tensor<?x64xf16>, tensor<96x64xf16>) -> tensor<?x96xf16>
  %q, %k = weft.split %y {sizes = array<i64: 64, 32>} : tensor<?x96xf16> -> (tensor<?x64xf16>, tensor<?x32xf16>)
  return %q, %k : tensor<?x64xf16>, tensor<?x32xf16>
}

// -----

// Tests that a norm whose output has two unrelated consumers (a projection
// and a residual add) is not fused: the normalized value must be stored.

// CHECK-LABEL: func.func @norm_two_consumers
// CHECK-NOT: weft.fusion
// CHECK: weft.rms_norm
// CHECK: weft.linear
// CHECK: weft.add
func.func @norm_two_consumers(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %g = weft.weight "norm.weight" : tensor<64xf16>
  %w = weft.weight "o.weight" : tensor<64x64xf16>
  %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %y = weft.linear %n, %w : (tensor<?x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16>
  %z = weft.add %n, %x : tensor<?x64xf16>
  return %y, %z : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Tests that a norm feeding something other than a projection's input is
// left alone.

// CHECK-LABEL: func.func @norm_into_silu
// CHECK-NOT: weft.fusion
func.func @norm_into_silu(%x: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %g = weft.weight "norm.weight" : tensor<64xf16>
  %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %s = weft.silu %n : tensor<?x64xf16>
  return %s : tensor<?x64xf16>
}

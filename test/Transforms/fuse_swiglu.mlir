// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-swiglu))' | FileCheck %s

// Tests that SiLU(gate) * up joins the merged gate/up projection region.

// CHECK-LABEL: func.func @swiglu_into_region
// CHECK: %[[M:.+]] = weft.fusion "rms_norm_linear_swiglu" (%arg0, %{{.+}}, %{{.+}}) : (tensor<?x64xf16>, tensor<64xf16>, tensor<256x64xf16>) -> tensor<?x128xf16>
// CHECK: weft.split
// CHECK-NEXT: %[[S:.+]] = weft.silu
// CHECK-NEXT: %[[P:.+]] = weft.mul %[[S]]
// CHECK-NEXT: weft.yield %[[P]] : tensor<?x128xf16>
// CHECK: return %[[M]]
func.func @swiglu_into_region(%x: tensor<?x64xf16>) -> tensor<?x128xf16> {
  %g = weft.weight "norm.weight" : tensor<64xf16>
  %w = weft.weight "gate_up.weight" : tensor<256x64xf16>
  %gu:2 = weft.fusion "rms_norm_linear" (%x, %g, %w) : (tensor<?x64xf16>, tensor<64xf16>, tensor<256x64xf16>) -> (tensor<?x128xf16>, tensor<?x128xf16>) {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<64xf16>, %c: tensor<256x64xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
    %y = weft.linear %n, %c : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf16>
    %gate, %up = weft.split %y {sizes = array<i64: 128, 128>} : tensor<?x256xf16> -> (tensor<?x128xf16>, tensor<?x128xf16>)
    weft.yield %gate, %up : tensor<?x128xf16>, tensor<?x128xf16>
  }
  %s = weft.silu %gu#0 : tensor<?x128xf16>
  %m = weft.mul %s, %gu#1 : tensor<?x128xf16>
  return %m : tensor<?x128xf16>
}

// -----

// Tests the same epilogue on a bare merged projection (no norm).

// CHECK-LABEL: func.func @swiglu_on_split
// CHECK: weft.fusion "linear_swiglu"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: weft.linear
// CHECK-NEXT: weft.split
// CHECK-NEXT: weft.silu
// CHECK-NEXT: weft.mul
func.func @swiglu_on_split(%x: tensor<?x64xf16>) -> tensor<?x128xf16> {
  %w = weft.weight "gate_up.weight" : tensor<256x64xf16>
  %y = weft.linear %x, %w : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf16>
  %gate, %up = weft.split %y {sizes = array<i64: 128, 128>} : tensor<?x256xf16> -> (tensor<?x128xf16>, tensor<?x128xf16>)
  %s = weft.silu %gate : tensor<?x128xf16>
  %m = weft.mul %up, %s : tensor<?x128xf16>
  return %m : tensor<?x128xf16>
}

// -----

// Tests that a SiLU with a second user is not absorbed (its value is needed
// outside), and neither are gate and up from different producers.

// CHECK-LABEL: func.func @swiglu_negative
// CHECK-NOT: weft.fusion
func.func @swiglu_negative(%g: tensor<?x128xf16>, %u: tensor<?x128xf16>) -> (tensor<?x128xf16>, tensor<?x128xf16>) {
  %s = weft.silu %g : tensor<?x128xf16>
  %m = weft.mul %s, %u : tensor<?x128xf16>
  %n = weft.add %s, %u : tensor<?x128xf16>
  return %m, %n : tensor<?x128xf16>, tensor<?x128xf16>
}

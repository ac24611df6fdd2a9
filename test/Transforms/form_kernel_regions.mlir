// RUN: weft-opt %s --pass-pipeline='builtin.module(func.func(weft-form-kernel-regions))' | FileCheck %s

// Tests that every op not fused yet gets its own region, weights stay
// outside as inputs, and existing regions are left as they are.

// CHECK-LABEL: func.func @loose_ops
// CHECK: %[[T:.+]] = weft.weight "model.embed_tokens.weight"
// CHECK: %[[X:.+]] = weft.fusion "embedding" (%[[T]], %arg0)
// CHECK: weft.fusion "silu" (%[[X]])
// CHECK: weft.fusion "already"
// CHECK-NOT: weft.fusion
func.func @loose_ops(%ids: tensor<?xi32>) -> tensor<?x64xf16> {
  %t = weft.weight "model.embed_tokens.weight" : tensor<256x64xf16>
  %x = weft.embedding %t, %ids : (tensor<256x64xf16>, tensor<?xi32>) -> tensor<?x64xf16>
  %s = weft.silu %x : tensor<?x64xf16>
  %r = weft.fusion "already" (%s) : (tensor<?x64xf16>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x64xf16>):
    %m = weft.mul %a, %a : tensor<?x64xf16>
    weft.yield %m : tensor<?x64xf16>
  }
  return %r : tensor<?x64xf16>
}

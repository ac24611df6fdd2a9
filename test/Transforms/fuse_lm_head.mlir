// RUN: weft-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(weft-fuse-lm-head))' | FileCheck %s

// Tests that the final norm, LM head and greedy selection form one region
// that yields both logits and tokens.

// CHECK-LABEL: func.func @greedy
// CHECK: %[[R:.+]]:2 = weft.fusion "rms_norm_logits_argmax" (%arg0, %{{.+}}, %{{.+}}) : (tensor<?x64xf16>, tensor<64xf16>, tensor<256x64xf16>) -> (tensor<?x256xf32>, tensor<?xi32>)
// CHECK: weft.rms_norm
// CHECK-NEXT: weft.logits
// CHECK-NEXT: weft.argmax
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @greedy(%x: tensor<?x64xf16>) -> (tensor<?x256xf32>, tensor<?xi32>) {
  %g = weft.weight "model.norm.weight" : tensor<64xf16>
  %h = weft.weight "lm_head.weight" : tensor<256x64xf16>
  %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %l = weft.logits %n, %h : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf32>
  %t = weft.argmax %l : tensor<?x256xf32> -> tensor<?xi32>
  return %l, %t : tensor<?x256xf32>, tensor<?xi32>
}

// -----

// Tests the sampled variant; its per-token parameters become inputs.

// CHECK-LABEL: func.func @sampled
// CHECK: weft.fusion "rms_norm_logits_sample" (%arg0, %{{.+}}, %{{.+}}, %arg1, %arg2, %arg3, %arg4)
func.func @sampled(%x: tensor<?x64xf16>, %t: tensor<?xf32>, %k: tensor<?xi32>, %p: tensor<?xf32>, %u: tensor<?xf32>) -> tensor<?xi32> {
  %g = weft.weight "model.norm.weight" : tensor<64xf16>
  %h = weft.weight "lm_head.weight" : tensor<256x64xf16>
  %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %l = weft.logits %n, %h : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf32>
  %s = weft.sample %l, %t, %k, %p, %u : (tensor<?x256xf32>, tensor<?xf32>, tensor<?xi32>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xi32>
  return %s : tensor<?xi32>
}

// -----

// Tests that a norm whose output is also used elsewhere stays outside.

// CHECK-LABEL: func.func @norm_shared
// CHECK: weft.rms_norm
// CHECK: weft.fusion "logits_argmax"
func.func @norm_shared(%x: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?xi32>) {
  %g = weft.weight "model.norm.weight" : tensor<64xf16>
  %h = weft.weight "lm_head.weight" : tensor<256x64xf16>
  %n = weft.rms_norm %x, %g {epsilon = 1.0e-05 : f64} : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %l = weft.logits %n, %h : (tensor<?x64xf16>, tensor<256x64xf16>) -> tensor<?x256xf32>
  %t = weft.argmax %l : tensor<?x256xf32> -> tensor<?xi32>
  return %n, %t : tensor<?x64xf16>, tensor<?xi32>
}

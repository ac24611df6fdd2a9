// Regions without a CUDA lowering fail with a message naming their kind.
// RUN: not weft-emit-cuda %s 2>&1 | FileCheck %s

// CHECK: error: @mystery region 0: region kind 'elementwise_silu': no CUDA kernel for this combination of ops
func.func @mystery(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = weft.fusion "elementwise_silu" (%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %s = weft.silu %a : tensor<2x8xf32>
    weft.yield %s : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}

// CHECK: error: @int8 region 0: region kind 'linear': weights of element type i8 are not supported (f16, bf16 or f32)
func.func @int8(%x: tensor<1x64xbf16>, %w: tensor<32x64xi8>) -> tensor<1x32xbf16> {
  %y = weft.fusion "linear" (%x, %w) : (tensor<1x64xbf16>, tensor<32x64xi8>) -> tensor<1x32xbf16> {
  ^bb0(%a: tensor<1x64xbf16>, %b: tensor<32x64xi8>):
    %l = weft.linear %a, %b : (tensor<1x64xbf16>, tensor<32x64xi8>) -> tensor<1x32xbf16>
    weft.yield %l : tensor<1x32xbf16>
  }
  return %y : tensor<1x32xbf16>
}

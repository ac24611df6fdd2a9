// The emitted kernels compile with NVRTC for Ampere and Hopper.
// RUN: weft-emit-cuda --no-source --compile=sm_86 %s | FileCheck %s
// RUN: weft-emit-cuda --no-source --compile=sm_90 --cubin-dir=%t %s | FileCheck %s --check-prefix=SM90
// RUN: ls %t | FileCheck %s --check-prefix=FILES

// CHECK: // step 0: kernel weft_linear_t2_k64_n32_gemv_{{[0-9a-f]+}}
// CHECK: //   compiled for sm_86: cubin ok, ptx ok
// SM90: //   compiled for sm_90: cubin ok, ptx ok
// FILES: weft_linear_t2_k64_n32_gemv_{{[0-9a-f]+}}.cubin
func.func @linear(%x: tensor<2x64xf16>, %w: tensor<32x64xf16>) -> tensor<2x32xf16> {
  %y = weft.fusion "linear" (%x, %w) {dims = {k = 64 : i64, n = 32 : i64, tokens = 2 : i64}}
      : (tensor<2x64xf16>, tensor<32x64xf16>) -> tensor<2x32xf16> {
  ^bb0(%a: tensor<2x64xf16>, %b: tensor<32x64xf16>):
    %l = weft.linear %a, %b : (tensor<2x64xf16>, tensor<32x64xf16>) -> tensor<2x32xf16>
    weft.yield %l : tensor<2x32xf16>
  }
  return %y : tensor<2x32xf16>
}

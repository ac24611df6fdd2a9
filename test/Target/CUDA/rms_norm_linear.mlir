// RMSNorm + merged Q/K/V projection + split: one GEMV kernel for decode,
// RMSNorm kernel + cuBLASLt GEMM + split copy for prefill.
// RUN: weft-emit-cuda %s | FileCheck %s
// RUN: weft-emit-cuda --no-source --function=qkv_bias_f16 %s | FileCheck %s --check-prefix=BIAS
// RUN: weft-emit-cuda --no-source --function=prefill %s | FileCheck %s --check-prefix=PREFILL

// CHECK-LABEL: // @qkv region 0 "rms_norm_linear": 1 step
// CHECK-NEXT: // step 0: kernel [[NAME:weft_rms_norm_linear_t1_k64_n96_gemv_[0-9a-f]+]]
// CHECK-NEXT: //   grid (3, 1, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x: RegionInput 0
// CHECK-NEXT: //   param 1 norm_w: RegionInput 1
// CHECK-NEXT: //   param 2 w: RegionInput 2
// CHECK-NEXT: //   param 3 w_scales: Scalar = 0
// CHECK-NEXT: //   param 4 candidates: Scalar = 0
// CHECK-NEXT: //   param 5 out0: RegionResult 0
// CHECK-NEXT: //   param 6 out1: RegionResult 1
// CHECK-NEXT: //   param 7 out2: RegionResult 2
// CHECK: #include "weft/gemv.cuh"
// CHECK: static constexpr int T = 1, TILES = 1, K = 64, NW = 96, NC = 96;
// CHECK-NEXT: static constexpr int VEC = 8, THREADS = 256, WARPS = THREADS / 32;
// CHECK-NEXT: static constexpr int KW = 1, CPW = 4, RPC = 1, CPB = WARPS / KW * CPW;
// CHECK-NEXT: static constexpr int SPLITS = 1,
// CHECK-NEXT: static constexpr bool NORM = true, PRENORM = false, MMA = false, ARGMAX = false;
// CHECK-NEXT: static constexpr float EPS = 1e-06f, NORM_OFFSET = 0.0f;
// CHECK-NEXT: using x_t = __nv_bfloat16;
// CHECK-NEXT: using w_t = __nv_bfloat16;
// The split: columns [0, 64) to the pack's pointer 0, [64, 80) to 1, [80, 96) to 2.
// CHECK: using Epilogue = weft::kernels::ColumnEpilogue<weft::kernels::NoBias, weft::kernels::Sum,
// CHECK-NEXT: weft::kernels::Columns<0, 64, 0, 1>,
// CHECK-NEXT: weft::kernels::Columns<64, 16, 1, 1>,
// CHECK-NEXT: weft::kernels::Columns<80, 16, 2, 1>>;
// CHECK: // entry: weft::kernels::gemvKernel<Config, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16>
func.func @qkv(%x: tensor<1x64xbf16>, %wn: tensor<64xbf16>, %w: tensor<96x64xbf16>)
    -> (tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>) {
  %r:3 = weft.fusion "rms_norm_linear" (%x, %wn, %w) {dims = {hidden = 64 : i64, k = 64 : i64, n = 96 : i64, tokens = 1 : i64}}
      : (tensor<1x64xbf16>, tensor<64xbf16>, tensor<96x64xbf16>) -> (tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>) {
  ^bb0(%a: tensor<1x64xbf16>, %b: tensor<64xbf16>, %c: tensor<96x64xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-06 : f64} : (tensor<1x64xbf16>, tensor<64xbf16>) -> tensor<1x64xbf16>
    %l = weft.linear %n, %c : (tensor<1x64xbf16>, tensor<96x64xbf16>) -> tensor<1x96xbf16>
    %s:3 = weft.split %l {sizes = array<i64: 64, 16, 16>} : tensor<1x96xbf16> -> (tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<1x64xbf16>, tensor<1x16xbf16>, tensor<1x16xbf16>
}

// Qwen2-style bias, f16, two tokens; the K result is not used (the
// canonicalizer dropped it), so no parameter is bound for it.
// BIAS-LABEL: // @qkv_bias_f16 region 0 "rms_norm_linear": 1 step
// BIAS-NEXT: // step 0: kernel weft_rms_norm_linear_t2_k64_n96_gemv_{{[0-9a-f]+}}
// BIAS-NEXT: //   grid (3, 1, 1) block (256, 1, 1) shared 0
// BIAS-NEXT: //   param 0 x: RegionInput 0
// BIAS-NEXT: //   param 1 norm_w: RegionInput 1
// BIAS-NEXT: //   param 2 w: RegionInput 2
// BIAS-NEXT: //   param 3 w_scales: Scalar = 0
// BIAS-NEXT: //   param 4 candidates: Scalar = 0
// BIAS-NEXT: //   param 5 bias: RegionInput 3
// BIAS-NEXT: //   param 6 out0: RegionResult 0
// BIAS-NEXT: //   param 7 out2: RegionResult 1
// BIAS-NOT: param
func.func @qkv_bias_f16(%x: tensor<2x64xf16>, %wn: tensor<64xf16>, %w: tensor<96x64xf16>, %bias: tensor<96xf16>)
    -> (tensor<2x64xf16>, tensor<2x16xf16>) {
  %r:2 = weft.fusion "rms_norm_linear" (%x, %wn, %w, %bias) {dims = {hidden = 64 : i64, k = 64 : i64, n = 96 : i64, tokens = 2 : i64}}
      : (tensor<2x64xf16>, tensor<64xf16>, tensor<96x64xf16>, tensor<96xf16>) -> (tensor<2x64xf16>, tensor<2x16xf16>) {
  ^bb0(%a: tensor<2x64xf16>, %b: tensor<64xf16>, %c: tensor<96x64xf16>, %d: tensor<96xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-06 : f64} : (tensor<2x64xf16>, tensor<64xf16>) -> tensor<2x64xf16>
    %l = weft.linear %n, %c, %d : (tensor<2x64xf16>, tensor<96x64xf16>, tensor<96xf16>) -> tensor<2x96xf16>
    %s:3 = weft.split %l {sizes = array<i64: 64, 16, 16>} : tensor<2x96xf16> -> (tensor<2x64xf16>, tensor<2x16xf16>, tensor<2x16xf16>)
    weft.yield %s#0, %s#2 : tensor<2x64xf16>, tensor<2x16xf16>
  }
  return %r#0, %r#1 : tensor<2x64xf16>, tensor<2x16xf16>
}

// PREFILL-LABEL: // @prefill region 0 "rms_norm_linear": 3 steps
// PREFILL-NEXT: // step 0: kernel weft_rms_norm_k64_{{[0-9a-f]+}}
// PREFILL-NEXT: //   grid (32, 1, 1) block (256, 1, 1) shared 0
// PREFILL-NEXT: //   param 0 x: RegionInput 0
// PREFILL-NEXT: //   param 1 norm_w: RegionInput 1
// PREFILL-NEXT: //   param 2 normalized: Scratch 0 (4096 bytes)
// PREFILL-NEXT: // step 1: gemm m 32 n 96 k 64 (bf16 x bf16 -> bf16)
// PREFILL-NEXT: //   a normalized: Scratch 0 (4096 bytes)
// PREFILL-NEXT: //   b w: RegionInput 2
// PREFILL-NEXT: //   c projection: Scratch 1 (6144 bytes)
// PREFILL-NEXT: // step 2: kernel weft_split_n96_{{[0-9a-f]+}}
// PREFILL-NEXT: //   grid (1, 32, 1) block (32, 1, 1) shared 0
// PREFILL-NEXT: //   param 0 projection: Scratch 1 (6144 bytes)
// PREFILL-NEXT: //   param 1 out0: RegionResult 0
// PREFILL-NEXT: //   param 2 out1: RegionResult 1
// PREFILL-NEXT: //   param 3 out2: RegionResult 2
func.func @prefill(%x: tensor<32x64xbf16>, %wn: tensor<64xbf16>, %w: tensor<96x64xbf16>)
    -> (tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<32x16xbf16>) {
  %r:3 = weft.fusion "rms_norm_linear" (%x, %wn, %w) {dims = {hidden = 64 : i64, k = 64 : i64, n = 96 : i64, tokens = 32 : i64}}
      : (tensor<32x64xbf16>, tensor<64xbf16>, tensor<96x64xbf16>) -> (tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<32x16xbf16>) {
  ^bb0(%a: tensor<32x64xbf16>, %b: tensor<64xbf16>, %c: tensor<96x64xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-06 : f64} : (tensor<32x64xbf16>, tensor<64xbf16>) -> tensor<32x64xbf16>
    %l = weft.linear %n, %c : (tensor<32x64xbf16>, tensor<96x64xbf16>) -> tensor<32x96xbf16>
    %s:3 = weft.split %l {sizes = array<i64: 64, 16, 16>} : tensor<32x96xbf16> -> (tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<32x16xbf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<32x16xbf16>
  }
  return %r#0, %r#1, %r#2 : tensor<32x64xbf16>, tensor<32x16xbf16>, tensor<32x16xbf16>
}

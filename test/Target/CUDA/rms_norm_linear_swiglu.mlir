// RMSNorm + gate/up projection + SiLU(gate) * up. Each output column reads
// gate row j and up row j + I of the concatenated weight.
// RUN: weft-emit-cuda --function=decode %s | FileCheck %s
// RUN: weft-emit-cuda --function=decode8 --compute-capability=90 %s | FileCheck %s --check-prefix=MMA
// RUN: weft-emit-cuda --function=decode8 --compute-capability=75 %s | FileCheck %s --check-prefix=SIMT
// RUN: weft-emit-cuda --function=prefill --no-source %s | FileCheck %s --check-prefix=PREFILL

// CHECK-LABEL: // @decode region 0 "rms_norm_linear_swiglu": 1 step
// CHECK-NEXT: // step 0: kernel [[NAME:weft_rms_norm_linear_swiglu_t1_k128_n512_gemv_[0-9a-f]+]]
// CHECK-NEXT: //   grid (16, 1, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x: RegionInput 0
// CHECK-NEXT: //   param 1 norm_w: RegionInput 1
// CHECK-NEXT: //   param 2 w: RegionInput 2
// CHECK-NEXT: //   param 3 w_scales: Scalar = 0
// CHECK-NEXT: //   param 4 candidates: Scalar = 0
// CHECK-NEXT: //   param 5 out: RegionResult 0
// CHECK: NW = 512, NC = 256;
// CHECK: static constexpr int KW = 1, CPW = 2, RPC = 2,
// CHECK: return (j == 0 ? 0 : 256) + col;
// CHECK: using Epilogue = weft::kernels::ColumnEpilogue<weft::kernels::NoBias, weft::kernels::GatedActivation<__nv_bfloat16, false>,
// CHECK-NEXT: weft::kernels::Columns<0, 256, 0, 1>>;
// CHECK: // entry: weft::kernels::gemvKernel<Config, __nv_bfloat16>
func.func @decode(%x: tensor<1x128xbf16>, %wn: tensor<128xbf16>, %w: tensor<512x128xbf16>) -> tensor<1x256xbf16> {
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 128 : i64, k = 128 : i64, n = 512 : i64, tokens = 1 : i64, width = 256 : i64}}
      : (tensor<1x128xbf16>, tensor<128xbf16>, tensor<512x128xbf16>) -> tensor<1x256xbf16> {
  ^bb0(%a: tensor<1x128xbf16>, %b: tensor<128xbf16>, %c: tensor<512x128xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<1x128xbf16>, tensor<128xbf16>) -> tensor<1x128xbf16>
    %l = weft.linear %n, %c : (tensor<1x128xbf16>, tensor<512x128xbf16>) -> tensor<1x512xbf16>
    %s:2 = weft.split %l {sizes = array<i64: 256, 256>} : tensor<1x512xbf16> -> (tensor<1x256xbf16>, tensor<1x256xbf16>)
    %g = weft.silu %s#0 : tensor<1x256xbf16>
    %m = weft.mul %g, %s#1 : tensor<1x256xbf16>
    weft.yield %m : tensor<1x256xbf16>
  }
  return %r : tensor<1x256xbf16>
}

// Eight tokens on sm_80 and newer: the tensor-core engine, 16 columns
// (a gate and an up tile) per warp.
// MMA-LABEL: // @decode8 region 0 "rms_norm_linear_swiglu": 1 step
// MMA-NEXT: // step 0: kernel weft_rms_norm_linear_swiglu_t8_k128_n512_gemv_{{[0-9a-f]+}}
// MMA-NEXT: //   grid (2, 1, 1) block (256, 1, 1) shared 0
// MMA: tensor-core GEMV over all 8 tokens
// MMA: static constexpr int KW = 1, CPW = 16, RPC = 2,
// MMA: XS = 144;
// MMA: static constexpr bool NORM = true, PRENORM = false, MMA = true, ARGMAX = false;
// MMA: using w_t = __nv_bfloat16;
// SIMT-LABEL: // @decode8 region 0 "rms_norm_linear_swiglu": 1 step
// SIMT-NEXT: // step 0: kernel weft_rms_norm_linear_swiglu_t8_k128_n512_gemv_{{[0-9a-f]+}}
// SIMT-NEXT: //   grid (16, 1, 1) block (256, 1, 1) shared 0
// SIMT: static constexpr int KW = 1, CPW = 2, RPC = 2,
// SIMT: static constexpr bool NORM = true, PRENORM = false, MMA = false, ARGMAX = false;
func.func @decode8(%x: tensor<8x128xbf16>, %wn: tensor<128xbf16>, %w: tensor<512x128xbf16>) -> tensor<8x256xbf16> {
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 128 : i64, k = 128 : i64, n = 512 : i64, tokens = 8 : i64, width = 256 : i64}}
      : (tensor<8x128xbf16>, tensor<128xbf16>, tensor<512x128xbf16>) -> tensor<8x256xbf16> {
  ^bb0(%a: tensor<8x128xbf16>, %b: tensor<128xbf16>, %c: tensor<512x128xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<8x128xbf16>, tensor<128xbf16>) -> tensor<8x128xbf16>
    %l = weft.linear %n, %c : (tensor<8x128xbf16>, tensor<512x128xbf16>) -> tensor<8x512xbf16>
    %s:2 = weft.split %l {sizes = array<i64: 256, 256>} : tensor<8x512xbf16> -> (tensor<8x256xbf16>, tensor<8x256xbf16>)
    %g = weft.silu %s#0 : tensor<8x256xbf16>
    %m = weft.mul %s#1, %g : tensor<8x256xbf16>
    weft.yield %m : tensor<8x256xbf16>
  }
  return %r : tensor<8x256xbf16>
}

// PREFILL-LABEL: // @prefill region 0 "rms_norm_linear_swiglu": 3 steps
// PREFILL-NEXT: // step 0: kernel weft_rms_norm_k128_{{[0-9a-f]+}}
// PREFILL: // step 1: gemm m 17 n 512 k 128 (bf16 x bf16 -> bf16)
// PREFILL-NEXT: //   a normalized: Scratch 0 (4352 bytes)
// PREFILL-NEXT: //   b w: RegionInput 2
// PREFILL-NEXT: //   c projection: Scratch 1 (17408 bytes)
// PREFILL-NEXT: // step 2: kernel weft_swiglu_i256_{{[0-9a-f]+}}
// PREFILL-NEXT: //   grid (1, 17, 1) block (32, 1, 1) shared 0
// PREFILL-NEXT: //   param 0 projection: Scratch 1 (17408 bytes)
// PREFILL-NEXT: //   param 1 out: RegionResult 0
func.func @prefill(%x: tensor<17x128xbf16>, %wn: tensor<128xbf16>, %w: tensor<512x128xbf16>) -> tensor<17x256xbf16> {
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 128 : i64, k = 128 : i64, n = 512 : i64, tokens = 17 : i64, width = 256 : i64}}
      : (tensor<17x128xbf16>, tensor<128xbf16>, tensor<512x128xbf16>) -> tensor<17x256xbf16> {
  ^bb0(%a: tensor<17x128xbf16>, %b: tensor<128xbf16>, %c: tensor<512x128xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<17x128xbf16>, tensor<128xbf16>) -> tensor<17x128xbf16>
    %l = weft.linear %n, %c : (tensor<17x128xbf16>, tensor<512x128xbf16>) -> tensor<17x512xbf16>
    %s:2 = weft.split %l {sizes = array<i64: 256, 256>} : tensor<17x512xbf16> -> (tensor<17x256xbf16>, tensor<17x256xbf16>)
    %g = weft.silu %s#0 : tensor<17x256xbf16>
    %m = weft.mul %g, %s#1 : tensor<17x256xbf16>
    weft.yield %m : tensor<17x256xbf16>
  }
  return %r : tensor<17x256xbf16>
}

// Projection + residual add. With few output columns, groups of warps
// share columns and split K inside a block (KW) first; a projection still
// too narrow for the GPU also splits K across blocks: a partial-sum kernel
// and a kernel that adds the partials, then the residual.
// RUN: weft-emit-cuda %s | FileCheck %s
// RUN: weft-emit-cuda --no-source --function=o_proj %s | FileCheck %s --check-prefix=OPROJ
// RUN: weft-emit-cuda --no-source --function=prefill %s | FileCheck %s --check-prefix=PREFILL

// CHECK-LABEL: // @down region 0 "linear_residual": 2 steps
// CHECK-NEXT: // step 0: kernel [[GEMV:weft_linear_residual_t4_k2048_n64_splitk_[0-9a-f]+]]
// CHECK-NEXT: //   grid (8, 2, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x: RegionInput 0
// CHECK-NEXT: //   param 1 norm_w: Scalar = 0
// CHECK-NEXT: //   param 2 w: RegionInput 1
// CHECK-NEXT: //   param 3 w_scales: Scalar = 0
// CHECK-NEXT: //   param 4 partials: Scratch 0 (2048 bytes)
// CHECK: #include "weft/gemv.cuh"
// CHECK: static constexpr int KW = 4, CPW = 4, RPC = 1, CPB = WARPS / KW * CPW;
// CHECK-NEXT: static constexpr int SPLITS = 2, KS = 1024, KC = 1024, XS = 1024;
// The partials kernel holds no epilogue.
// CHECK-NOT: Epilogue
// CHECK: static constexpr bool RELEASE_EARLY = true;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::gemvSplitKernel<Config>
// CHECK: // step 1: kernel [[REDUCE:weft_linear_residual_t4_k2048_n64_reduce_[0-9a-f]+]]
// CHECK-NEXT: //   grid (8, 1, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 partials: Scratch 0 (2048 bytes)
// CHECK-NEXT: //   param 1 candidates: Scalar = 0
// CHECK-NEXT: //   param 2 residual: RegionInput 2
// CHECK-NEXT: //   param 3 out: RegionResult 0
// CHECK: using Epilogue = weft::kernels::ColumnEpilogue<weft::kernels::NoBias, weft::kernels::PlusResidual<0, __nv_bfloat16>,
// CHECK-NEXT: weft::kernels::Columns<0, 64, 1, 1>>;
// CHECK-NEXT: static constexpr bool RELEASE_EARLY = false;
// CHECK: // entry: weft::kernels::gemvReduceKernel<Config, const __nv_bfloat16, __nv_bfloat16>
func.func @down(%x: tensor<4x2048xbf16>, %w: tensor<64x2048xbf16>, %h: tensor<4x64xbf16>) -> tensor<4x64xbf16> {
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 2048 : i64, n = 64 : i64, tokens = 4 : i64, width = 64 : i64}}
      : (tensor<4x2048xbf16>, tensor<64x2048xbf16>, tensor<4x64xbf16>) -> tensor<4x64xbf16> {
  ^bb0(%a: tensor<4x2048xbf16>, %b: tensor<64x2048xbf16>, %c: tensor<4x64xbf16>):
    %l = weft.linear %a, %b : (tensor<4x2048xbf16>, tensor<64x2048xbf16>) -> tensor<4x64xbf16>
    %s = weft.add %c, %l : tensor<4x64xbf16>
    weft.yield %s : tensor<4x64xbf16>
  }
  return %r : tensor<4x64xbf16>
}

// Llama 3.1 8B's O projection at one token: 128 blocks of 32 columns would
// leave SMs idle; four warps per 8 columns make 512 blocks and one kernel.
// OPROJ-LABEL: // @o_proj region 0 "linear_residual": 1 step
// OPROJ-NEXT: // step 0: kernel weft_linear_residual_t1_k4096_n4096_gemv_{{[0-9a-f]+}}
// OPROJ-NEXT: //   grid (512, 1, 1) block (256, 1, 1) shared 0
func.func @o_proj(%x: tensor<1x4096xf16>, %w: tensor<4096x4096xf16>, %h: tensor<1x4096xf16>) -> tensor<1x4096xf16> {
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 1 : i64, width = 4096 : i64}}
      : (tensor<1x4096xf16>, tensor<4096x4096xf16>, tensor<1x4096xf16>) -> tensor<1x4096xf16> {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096x4096xf16>, %c: tensor<1x4096xf16>):
    %l = weft.linear %a, %b : (tensor<1x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16>
    %s = weft.add %c, %l : tensor<1x4096xf16>
    weft.yield %s : tensor<1x4096xf16>
  }
  return %r : tensor<1x4096xf16>
}

// Prefill: the residual goes into the GEMM's epilogue.
// PREFILL-LABEL: // @prefill region 0 "linear_residual": 1 step
// PREFILL-NEXT: // step 0: gemm m 64 n 64 k 2048 (bf16 x bf16 -> bf16)
// PREFILL-NEXT: //   a x: RegionInput 0
// PREFILL-NEXT: //   b w: RegionInput 1
// PREFILL-NEXT: //   c out: RegionResult 0
// PREFILL-NEXT: //   residual residual: RegionInput 2
func.func @prefill(%x: tensor<64x2048xbf16>, %w: tensor<64x2048xbf16>, %h: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 2048 : i64, n = 64 : i64, tokens = 64 : i64, width = 64 : i64}}
      : (tensor<64x2048xbf16>, tensor<64x2048xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  ^bb0(%a: tensor<64x2048xbf16>, %b: tensor<64x2048xbf16>, %c: tensor<64x64xbf16>):
    %l = weft.linear %a, %b : (tensor<64x2048xbf16>, tensor<64x2048xbf16>) -> tensor<64x64xbf16>
    %s = weft.add %l, %c : tensor<64x64xbf16>
    weft.yield %s : tensor<64x64xbf16>
  }
  return %r : tensor<64x64xbf16>
}

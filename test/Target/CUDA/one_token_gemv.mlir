// One token through 4-bit codes in 16-row tiles (batch-1 decode of an AWQ,
// GPTQ or int4 model) at Llama 3.1 8B sizes: weft/gemv_one_token.cuh, a
// warp per 16 columns, 4 warps a block, registers capped for 8 blocks per
// SM and K split into as many ranges as one wave of such blocks holds
// (132 SMs), and the last block of each column block to
// arrive sums the partials and runs the epilogue, so there is no reduce
// kernel. Its arrival counters are a zeroed scratch buffer.
// RUN: weft-emit-cuda %s | FileCheck %s
// RUN: weft-emit-cuda --no-source --compile=sm_86 %s | FileCheck %s --check-prefix=SM86
// RUN: weft-emit-cuda --no-source --compile=sm_90 %s | FileCheck %s --check-prefix=SM90
// Without tiles, or at two tokens, the general GEMV template runs.
// RUN: sed -e 's/, tiled = true//' %s | weft-emit-cuda --no-source - | FileCheck %s --check-prefix=UNTILED

// RMSNorm + Q/K/V: 96 column blocks, 11 splits of 3 steps (the last 2).
// CHECK-LABEL: // @qkv region 0 "rms_norm_linear": 1 step
// CHECK-NEXT: // step 0: kernel weft_rms_norm_linear_t1_k4096_n6144_gemv1_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (96, 11, 1) block (128, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x: RegionInput 0
// CHECK-NEXT: //   param 1 norm_w: RegionInput 1
// CHECK-NEXT: //   param 2 w: RegionInput 2
// CHECK-NEXT: //   param 3 w_scales: RegionInput 2 (its scales)
// CHECK-NEXT: //   param 4 out0: RegionResult 0
// CHECK-NEXT: //   param 5 out1: RegionResult 1
// CHECK-NEXT: //   param 6 out2: RegionResult 2
// CHECK-NEXT: //   param 7 partials: Scratch 0 (270336 bytes)
// CHECK-NEXT: //   param 8 arrivals: Scratch 3 (384 bytes, zeroed)
// CHECK: #include "weft/gemv_one_token.cuh"
// CHECK: static constexpr int K = 4096, NW = 6144, NC = 6144, RPC = 1;
// CHECK: static constexpr int BLOCKS_PER_SM = 8;
// CHECK: static constexpr int SPLITS = 11, SPS = 3, U = 2;
// CHECK: static constexpr bool NORM = true;
// CHECK: static constexpr float EPS = 1e-05f, NORM_OFFSET = 0.0f;
// CHECK: static constexpr bool RELEASE_EARLY = true;
// CHECK: using W = weft::kernels::PackedRows<4, 128, 32, m_t, weft::kernels::Codes::Int, true>;
// It waits for the kernel before it itself, after its first loads of
// codes, then releases the next one at once (programmatic launch), so the
// entry point has no wait of its own.
// CHECK: __launch_bounds__(Config::THREADS, Config::BLOCKS_PER_SM)
// CHECK-NEXT: weft_rms_norm_linear_t1_k4096_n6144_gemv1_{{[0-9a-f]+}}(const Config::x_t
// CHECK-NEXT: weft::kernels::gemvOneToken<Config>(x, norm_w, w, w_scales, Epilogue{out0, out1, out2}, partials, arrivals);
// SM86: // step 0: kernel weft_rms_norm_linear_t1_k4096_n6144_gemv1_
// SM86: //   compiled for sm_86: cubin ok, ptx ok
// SM90: //   compiled for sm_90: cubin ok, ptx ok
// UNTILED-LABEL: // @qkv region 0 "rms_norm_linear": 1 step
// UNTILED-NEXT: // step 0: kernel weft_rms_norm_linear_t1_k4096_n6144_gemv_
func.func @qkv(%x: tensor<1x4096xf16>, %wn: tensor<4096xf16>)
    -> (tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) {
  %w = weft.weight "attn.qkv" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<6144x4096xf16>
  %r:3 = weft.fusion "rms_norm_linear" (%x, %wn, %w) {dims = {hidden = 4096 : i64, k = 4096 : i64, n = 6144 : i64, tokens = 1 : i64}}
      : (tensor<1x4096xf16>, tensor<4096xf16>, tensor<6144x4096xf16>) -> (tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096xf16>, %c: tensor<6144x4096xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
    %l = weft.linear %n, %c : (tensor<1x4096xf16>, tensor<6144x4096xf16>) -> tensor<1x6144xf16>
    %s:3 = weft.split %l {sizes = array<i64: 4096, 1024, 1024>} : tensor<1x6144xf16> -> (tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>)
    weft.yield %s#0, %s#1, %s#2 : tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>
  }
  return %r#0, %r#1, %r#2 : tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>
}

// RMSNorm + gate/up + SwiGLU: two row kinds per warp, one step in flight,
// 224 column blocks, 4 splits.
// CHECK-LABEL: // @gate_up region 0 "rms_norm_linear_swiglu": 1 step
// CHECK-NEXT: // step 0: kernel weft_rms_norm_linear_swiglu_t1_k4096_n28672_gemv1_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (224, 4, 1) block (128, 1, 1) shared 0
// CHECK: //   param 5 partials: Scratch 0 (458752 bytes)
// CHECK-NEXT: //   param 6 arrivals: Scratch 3 (896 bytes, zeroed)
// CHECK: static constexpr int K = 4096, NW = 28672, NC = 14336, RPC = 2;
// CHECK: static constexpr int SPLITS = 4, SPS = 8, U = 1;
// CHECK: return (j == 0 ? 0 : 14336) + col;
// CHECK: wf_silu(gate)
func.func @gate_up(%x: tensor<1x4096xf16>, %wn: tensor<4096xf16>) -> tensor<1x14336xf16> {
  %w = weft.weight "mlp.gate_up" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<28672x4096xf16>
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 4096 : i64, k = 4096 : i64, n = 28672 : i64, tokens = 1 : i64}}
      : (tensor<1x4096xf16>, tensor<4096xf16>, tensor<28672x4096xf16>) -> tensor<1x14336xf16> {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096xf16>, %c: tensor<28672x4096xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
    %l = weft.linear %n, %c : (tensor<1x4096xf16>, tensor<28672x4096xf16>) -> tensor<1x28672xf16>
    %s:2 = weft.split %l {sizes = array<i64: 14336, 14336>} : tensor<1x28672xf16> -> (tensor<1x14336xf16>, tensor<1x14336xf16>)
    %g = weft.silu %s#0 : tensor<1x14336xf16>
    %m = weft.mul %g, %s#1 : tensor<1x14336xf16>
    weft.yield %m : tensor<1x14336xf16>
  }
  return %r : tensor<1x14336xf16>
}

// down + residual, bf16 (no SUM_SCALE: each weight is scaled in bf16):
// 112 steps in 16 splits of 7.
// CHECK-LABEL: // @down_bf16 region 0 "linear_residual": 1 step
// CHECK-NEXT: // step 0: kernel weft_linear_residual_t1_k14336_n4096_gemv1_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (64, 16, 1) block (128, 1, 1) shared 0
// CHECK: static constexpr int SPLITS = 16, SPS = 7, U = 2;
// CHECK: using m_t = __nv_bfloat16;
// CHECK: weft::kernels::gemvOneToken<Config>(x, nullptr, w, w_scales, Epilogue{residual, out}, partials, arrivals);
// SM90: // step 0: kernel weft_linear_residual_t1_k14336_n4096_gemv1_
// SM90: //   compiled for sm_90: cubin ok, ptx ok
func.func @down_bf16(%x: tensor<1x14336xbf16>, %h: tensor<1x4096xbf16>) -> tensor<1x4096xbf16> {
  %w = weft.weight "mlp.down" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<4096x14336xbf16>
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 14336 : i64, n = 4096 : i64, tokens = 1 : i64, width = 4096 : i64}}
      : (tensor<1x14336xbf16>, tensor<4096x14336xbf16>, tensor<1x4096xbf16>) -> tensor<1x4096xbf16> {
  ^bb0(%a: tensor<1x14336xbf16>, %b: tensor<4096x14336xbf16>, %c: tensor<1x4096xbf16>):
    %l = weft.linear %a, %b : (tensor<1x14336xbf16>, tensor<4096x14336xbf16>) -> tensor<1x4096xbf16>
    %s = weft.add %c, %l : tensor<1x4096xbf16>
    weft.yield %s : tensor<1x4096xbf16>
  }
  return %r : tensor<1x4096xbf16>
}

// A projection that fits one split (few columns would not: here 16
// columns, one block) still has no reduce kernel; with one split no
// partials and no counters. Two tokens: the general template.
// CHECK-LABEL: // @narrow region 0 "linear": 1 step
// CHECK-NEXT: // step 0: kernel weft_linear_t1_k256_n64_gemv1_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (1, 1, 1) block (128, 1, 1) shared 0
// CHECK-NOT: Scratch
// CHECK: static constexpr int SPLITS = 1, SPS = 2, U = 2;
// CHECK: gemvOneToken<Config>(x, nullptr, w, w_scales, Epilogue{out}, nullptr, nullptr);
// CHECK-LABEL: // @two_tokens region 0 "linear": 2 steps
// CHECK-NEXT: // step 0: kernel weft_linear_t2_k4096_n4096_splitk_
func.func @narrow(%x: tensor<1x256xf16>) -> tensor<1x64xf16> {
  %w = weft.weight "attn.q" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<64x256xf16>
  %r = weft.fusion "linear" (%x, %w) {dims = {k = 256 : i64, n = 64 : i64, tokens = 1 : i64}}
      : (tensor<1x256xf16>, tensor<64x256xf16>) -> tensor<1x64xf16> {
  ^bb0(%a: tensor<1x256xf16>, %c: tensor<64x256xf16>):
    %l = weft.linear %a, %c : (tensor<1x256xf16>, tensor<64x256xf16>) -> tensor<1x64xf16>
    weft.yield %l : tensor<1x64xf16>
  }
  return %r : tensor<1x64xf16>
}
func.func @two_tokens(%x: tensor<2x4096xf16>) -> tensor<2x4096xf16> {
  %w = weft.weight "attn.o" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<4096x4096xf16>
  %r = weft.fusion "linear" (%x, %w) {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 2 : i64}}
      : (tensor<2x4096xf16>, tensor<4096x4096xf16>) -> tensor<2x4096xf16> {
  ^bb0(%a: tensor<2x4096xf16>, %c: tensor<4096x4096xf16>):
    %l = weft.linear %a, %c : (tensor<2x4096xf16>, tensor<4096x4096xf16>) -> tensor<2x4096xf16>
    weft.yield %l : tensor<2x4096xf16>
  }
  return %r : tensor<2x4096xf16>
}

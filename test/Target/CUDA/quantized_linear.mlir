// Quantized projections (#weft.quant on the weight): the GEMV's
// tensor-core engine expands the codes at every token count, with the
// codes and their (scale, zero) pairs as two parameters. Few tokens
// normalize inside the kernel (PRENORM); more get an RMSNorm kernel first,
// then tiles of tokens; more than 32 expand the codes for cuBLASLt.
// RUN: weft-emit-cuda %s | FileCheck %s
// RUN: weft-emit-cuda --no-source %s | FileCheck %s --check-prefix=PREFILL

// CHECK-LABEL: // @decode region 0 "rms_norm_linear_swiglu": 1 step
// CHECK-NEXT: // step 0: kernel [[NAME:weft_rms_norm_linear_swiglu_t1_k256_n1024_gemv_[0-9a-f]+]]
// CHECK: //   param 2 w: RegionInput 2
// CHECK-NEXT: //   param 3 w_scales: RegionInput 2 (its scales)
// CHECK: static constexpr int T = 1, TILES = 1, K = 256, NW = 1024, NC = 512;
// CHECK: static constexpr bool NORM = true, PRENORM = true, MMA = true, ARGMAX = false;
// CHECK: using w_t = unsigned;
// CHECK: using m_t = __half;
// CHECK: // 4-bit codes, a (scale, zero) pair per 128 inputs of a row
// CHECK-NEXT: using W = weft::kernels::PackedRows<4, 128, 32, m_t>;
// 4-bit kernels release the next kernel at once (programmatic launch).
// CHECK: static constexpr bool RELEASE_EARLY = true;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::gemvKernel<Config, __half>
func.func @decode(%x: tensor<1x256xf16>, %wn: tensor<256xf16>) -> tensor<1x512xf16> {
  %w = weft.weight "mlp.gate_up" {quant = #weft.quant<bits = 4, group = 128>} : tensor<1024x256xf16>
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 1024 : i64, tokens = 1 : i64}}
      : (tensor<1x256xf16>, tensor<256xf16>, tensor<1024x256xf16>) -> tensor<1x512xf16> {
  ^bb0(%a: tensor<1x256xf16>, %b: tensor<256xf16>, %c: tensor<1024x256xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<1x256xf16>, tensor<256xf16>) -> tensor<1x256xf16>
    %l = weft.linear %n, %c : (tensor<1x256xf16>, tensor<1024x256xf16>) -> tensor<1x1024xf16>
    %s:2 = weft.split %l {sizes = array<i64: 512, 512>} : tensor<1x1024xf16> -> (tensor<1x512xf16>, tensor<1x512xf16>)
    %g = weft.silu %s#0 : tensor<1x512xf16>
    %m = weft.mul %g, %s#1 : tensor<1x512xf16>
    weft.yield %m : tensor<1x512xf16>
  }
  return %r : tensor<1x512xf16>
}

// 32 tokens: the norm first, then tiles of tokens, at most 32 per weight
// row of a column for 4-bit codes (SwiGLU: two rows, tiles of 16) and 64
// for 8-bit codes (one tile of 32).
// PREFILL-LABEL: // @batch region 0 "rms_norm_linear_swiglu": 2 steps
// PREFILL-NEXT: // step 0: kernel weft_rms_norm_k256_
// PREFILL: //   param 2 normalized: Scratch 3 (16384 bytes)
// PREFILL-NEXT: // step 1: kernel weft_rms_norm_linear_swiglu_t32_k256_n1024_gemv_
// PREFILL-NEXT: //   grid (4, 1, 2) block (256, 1, 1) shared 0
// PREFILL-NEXT: //   param 0 normalized: Scratch 3 (16384 bytes)
// PREFILL-NEXT: //   param 1 norm_w: Scalar = 0
// PREFILL-NEXT: //   param 2 w: RegionInput 2
// PREFILL-NEXT: //   param 3 w_scales: RegionInput 2 (its scales)
func.func @batch(%x: tensor<32x256xf16>, %wn: tensor<256xf16>) -> tensor<32x512xf16> {
  %w = weft.weight "mlp.gate_up" {quant = #weft.quant<bits = 4, group = 128>} : tensor<1024x256xf16>
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 1024 : i64, tokens = 32 : i64}}
      : (tensor<32x256xf16>, tensor<256xf16>, tensor<1024x256xf16>) -> tensor<32x512xf16> {
  ^bb0(%a: tensor<32x256xf16>, %b: tensor<256xf16>, %c: tensor<1024x256xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<32x256xf16>, tensor<256xf16>) -> tensor<32x256xf16>
    %l = weft.linear %n, %c : (tensor<32x256xf16>, tensor<1024x256xf16>) -> tensor<32x1024xf16>
    %s:2 = weft.split %l {sizes = array<i64: 512, 512>} : tensor<32x1024xf16> -> (tensor<32x512xf16>, tensor<32x512xf16>)
    %g = weft.silu %s#0 : tensor<32x512xf16>
    %m = weft.mul %g, %s#1 : tensor<32x512xf16>
    weft.yield %m : tensor<32x512xf16>
  }
  return %r : tensor<32x512xf16>
}

// PREFILL-LABEL: // @batch8 region 0 "rms_norm_linear_swiglu": 2 steps
// PREFILL: // step 1: kernel weft_rms_norm_linear_swiglu_t32_k256_n1024_gemv_
// PREFILL-NEXT: //   grid (4, 1, 1) block (256, 1, 1) shared 0
func.func @batch8(%x: tensor<32x256xf16>, %wn: tensor<256xf16>) -> tensor<32x512xf16> {
  %w = weft.weight "mlp.gate_up" {quant = #weft.quant<bits = 8, group = 256>} : tensor<1024x256xf16>
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 1024 : i64, tokens = 32 : i64}}
      : (tensor<32x256xf16>, tensor<256xf16>, tensor<1024x256xf16>) -> tensor<32x512xf16> {
  ^bb0(%a: tensor<32x256xf16>, %b: tensor<256xf16>, %c: tensor<1024x256xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<32x256xf16>, tensor<256xf16>) -> tensor<32x256xf16>
    %l = weft.linear %n, %c : (tensor<32x256xf16>, tensor<1024x256xf16>) -> tensor<32x1024xf16>
    %s:2 = weft.split %l {sizes = array<i64: 512, 512>} : tensor<32x1024xf16> -> (tensor<32x512xf16>, tensor<32x512xf16>)
    %g = weft.silu %s#0 : tensor<32x512xf16>
    %m = weft.mul %g, %s#1 : tensor<32x512xf16>
    weft.yield %m : tensor<32x512xf16>
  }
  return %r : tensor<32x512xf16>
}

// More than 32 tokens (96 here): the codes expanded to f16 once, then the
// norm, cuBLASLt and SwiGLU as for 16-bit weights.
// CHECK-LABEL: // @prefill region 0 "rms_norm_linear_swiglu": 4 steps
// CHECK: static constexpr weft::kernels::Codes FORMAT = weft::kernels::Codes::Int;
// CHECK-NEXT: static constexpr bool TILED = false;  // codes in 16-row tiles of 128 inputs
// CHECK-NEXT: using m_t = __half;
// PREFILL-LABEL: // @prefill region 0 "rms_norm_linear_swiglu": 4 steps
// PREFILL-NEXT: // step 0: kernel weft_expand_codes_n1024_k256_
// PREFILL-NEXT: //   grid (256, 1, 1) block (256, 1, 1) shared 0
// PREFILL-NEXT: //   param 0 w: RegionInput 2
// PREFILL-NEXT: //   param 1 w_scales: RegionInput 2 (its scales)
// PREFILL-NEXT: //   param 2 expanded: Scratch 4 (524288 bytes)
// PREFILL-NEXT: // step 1: kernel weft_rms_norm_k256_
// PREFILL: // step 2: gemm m 96 n 1024 k 256 (f16 x f16 -> f16)
// PREFILL-NEXT: //   a normalized: Scratch 0 (49152 bytes)
// PREFILL-NEXT: //   b expanded: Scratch 4 (524288 bytes)
// PREFILL: // step 3: kernel weft_swiglu_i512_
func.func @prefill(%x: tensor<96x256xf16>, %wn: tensor<256xf16>) -> tensor<96x512xf16> {
  %w = weft.weight "mlp.gate_up" {quant = #weft.quant<bits = 8, group = 256>} : tensor<1024x256xf16>
  %r = weft.fusion "rms_norm_linear_swiglu" (%x, %wn, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 1024 : i64, tokens = 96 : i64}}
      : (tensor<96x256xf16>, tensor<256xf16>, tensor<1024x256xf16>) -> tensor<96x512xf16> {
  ^bb0(%a: tensor<96x256xf16>, %b: tensor<256xf16>, %c: tensor<1024x256xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<96x256xf16>, tensor<256xf16>) -> tensor<96x256xf16>
    %l = weft.linear %n, %c : (tensor<96x256xf16>, tensor<1024x256xf16>) -> tensor<96x1024xf16>
    %s:2 = weft.split %l {sizes = array<i64: 512, 512>} : tensor<96x1024xf16> -> (tensor<96x512xf16>, tensor<96x512xf16>)
    %g = weft.silu %s#0 : tensor<96x512xf16>
    %m = weft.mul %g, %s#1 : tensor<96x512xf16>
    weft.yield %m : tensor<96x512xf16>
  }
  return %r : tensor<96x512xf16>
}

// A bf16 model: codes expanded to bf16 pairs, staged and multiplied in bf16.
// CHECK-LABEL: // @bf16 region 0 "rms_norm_linear": 1 step
// CHECK: using s_t = __nv_bfloat16;
// CHECK-NEXT: using m_t = __nv_bfloat16;
// CHECK: using W = weft::kernels::PackedRows<4, 128, 32, m_t>;
func.func @bf16(%x: tensor<1x256xbf16>, %wn: tensor<256xbf16>) -> tensor<1x512xbf16> {
  %w = weft.weight "attn.q" {quant = #weft.quant<bits = 4, group = 128>} : tensor<512x256xbf16>
  %r = weft.fusion "rms_norm_linear" (%x, %wn, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 512 : i64, tokens = 1 : i64}}
      : (tensor<1x256xbf16>, tensor<256xbf16>, tensor<512x256xbf16>) -> tensor<1x512xbf16> {
  ^bb0(%a: tensor<1x256xbf16>, %b: tensor<256xbf16>, %c: tensor<512x256xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<1x256xbf16>, tensor<256xbf16>) -> tensor<1x256xbf16>
    %l = weft.linear %n, %c : (tensor<1x256xbf16>, tensor<512x256xbf16>) -> tensor<1x512xbf16>
    weft.yield %l : tensor<1x512xbf16>
  }
  return %r : tensor<1x512xbf16>
}

// FP8 E4M3 codes, one f32 scale per row (applied to the sums); at 96
// tokens expanded to the model's type for cuBLASLt.
// CHECK-LABEL: // @fp8 region 0 "linear": 1 step
// CHECK: // FP8 E4M3 codes, an f32 scale per row
// CHECK-NEXT: using W = weft::kernels::PackedRows<8, 256, 16, m_t, weft::kernels::Codes::E4M3>;
// 8-bit ones as their blocks exit.
// CHECK: static constexpr bool RELEASE_EARLY = false;
// CHECK-NEXT: };
// CHECK-NEXT: // entry: weft::kernels::gemvKernel<Config, __half>
// CHECK-LABEL: // @fp8_prefill region 0 "linear": 2 steps
// CHECK-NEXT: // step 0: kernel weft_expand_codes_n512_k256_
// CHECK: // The FP8 E4M3 codes of a projection expanded to its __half matrix.
// CHECK: static constexpr weft::kernels::Codes FORMAT = weft::kernels::Codes::E4M3;
func.func @fp8(%x: tensor<1x256xf16>) -> tensor<1x512xf16> {
  %w = weft.weight "attn.q" {quant = #weft.quant<bits = 8, group = 256, format = e4m3>} : tensor<512x256xf16>
  %r = weft.fusion "linear" (%x, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 512 : i64, tokens = 1 : i64}}
      : (tensor<1x256xf16>, tensor<512x256xf16>) -> tensor<1x512xf16> {
  ^bb0(%a: tensor<1x256xf16>, %c: tensor<512x256xf16>):
    %l = weft.linear %a, %c : (tensor<1x256xf16>, tensor<512x256xf16>) -> tensor<1x512xf16>
    weft.yield %l : tensor<1x512xf16>
  }
  return %r : tensor<1x512xf16>
}
func.func @fp8_prefill(%x: tensor<96x256xf16>) -> tensor<96x512xf16> {
  %w = weft.weight "attn.q" {quant = #weft.quant<bits = 8, group = 256, format = e4m3>} : tensor<512x256xf16>
  %r = weft.fusion "linear" (%x, %w) {dims = {hidden = 256 : i64, k = 256 : i64, n = 512 : i64, tokens = 96 : i64}}
      : (tensor<96x256xf16>, tensor<512x256xf16>) -> tensor<96x512xf16> {
  ^bb0(%a: tensor<96x256xf16>, %c: tensor<512x256xf16>):
    %l = weft.linear %a, %c : (tensor<96x256xf16>, tensor<512x256xf16>) -> tensor<96x512xf16>
    weft.yield %l : tensor<96x512xf16>
  }
  return %r : tensor<96x512xf16>
}

// 4-bit codes for one token with one weight row per column (here an O
// projection) also split K inside the block, 4 warps per group, so fewer
// blocks split it (3, not 8); two tokens split K across blocks only.
// RUN: weft-emit-cuda --function=o_proj_t1 %s | FileCheck %s --check-prefix=OT1
// RUN: weft-emit-cuda --function=o_proj_t2 %s | FileCheck %s --check-prefix=OT2
// OT1-LABEL: // @o_proj_t1 region 0 "linear_residual": 2 steps
// OT1-NEXT: // step 0: kernel weft_linear_residual_t1_k4096_n4096_splitk_
// OT1-NEXT: //   grid (128, 3, 1) block (256, 1, 1) shared 0
// OT1: static constexpr int KW = 4, CPW = 16, RPC = 1, CPB = WARPS / KW * CPW;
// OT1-NEXT: static constexpr int SPLITS = 3, KS = 1536, KC = 1536, XS = 1552;
// OT2-LABEL: // @o_proj_t2 region 0 "linear_residual": 2 steps
// OT2-NEXT: // step 0: kernel weft_linear_residual_t2_k4096_n4096_splitk_
// OT2-NEXT: //   grid (32, 8, 1) block (256, 1, 1) shared 0
// OT2: static constexpr int KW = 1, CPW = 16, RPC = 1, CPB = WARPS / KW * CPW;
// OT2-NEXT: static constexpr int SPLITS = 8, KS = 512, KC = 512, XS = 528;
// Codes stored in 16-row tiles (#weft.quant's `tiled`) are read through the
// tiled policy, by the GEMV and by the expansion for many tokens alike.
// RUN: weft-emit-cuda --function=o_proj_tiled %s | FileCheck %s --check-prefix=TILED
// TILED: // 4-bit codes in 16-row tiles, a (scale, zero) pair per 128 inputs of a row
// TILED-NEXT: using W = weft::kernels::PackedRows<4, 128, 32, m_t, weft::kernels::Codes::Int, true>;
// TILED: static constexpr bool TILED = true;  // codes in 16-row tiles of 128 inputs
// TILED: // entry: weft::kernels::expandCodesKernel<Config>
func.func @o_proj_tiled(%x: tensor<1x4096xf16>, %h: tensor<1x4096xf16>, %y: tensor<128x4096xf16>, %g: tensor<128x4096xf16>) -> (tensor<1x4096xf16>, tensor<128x4096xf16>) {
  %w = weft.weight "attn.o" {quant = #weft.quant<bits = 4, group = 128, tiled = true>} : tensor<4096x4096xf16>
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 1 : i64, width = 4096 : i64}}
      : (tensor<1x4096xf16>, tensor<4096x4096xf16>, tensor<1x4096xf16>) -> tensor<1x4096xf16> {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096x4096xf16>, %c: tensor<1x4096xf16>):
    %l = weft.linear %a, %b : (tensor<1x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16>
    %s = weft.add %c, %l : tensor<1x4096xf16>
    weft.yield %s : tensor<1x4096xf16>
  }
  %r2 = weft.fusion "linear_residual" (%y, %w, %g) {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 128 : i64, width = 4096 : i64}}
      : (tensor<128x4096xf16>, tensor<4096x4096xf16>, tensor<128x4096xf16>) -> tensor<128x4096xf16> {
  ^bb0(%a: tensor<128x4096xf16>, %b: tensor<4096x4096xf16>, %c: tensor<128x4096xf16>):
    %l = weft.linear %a, %b : (tensor<128x4096xf16>, tensor<4096x4096xf16>) -> tensor<128x4096xf16>
    %s = weft.add %c, %l : tensor<128x4096xf16>
    weft.yield %s : tensor<128x4096xf16>
  }
  return %r, %r2 : tensor<1x4096xf16>, tensor<128x4096xf16>
}
func.func @o_proj_t1(%x: tensor<1x4096xf16>, %h: tensor<1x4096xf16>) -> tensor<1x4096xf16> {
  %w = weft.weight "attn.o" {quant = #weft.quant<bits = 4, group = 128>} : tensor<4096x4096xf16>
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 1 : i64, width = 4096 : i64}}
      : (tensor<1x4096xf16>, tensor<4096x4096xf16>, tensor<1x4096xf16>) -> tensor<1x4096xf16> {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096x4096xf16>, %c: tensor<1x4096xf16>):
    %l = weft.linear %a, %b : (tensor<1x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16>
    %s = weft.add %c, %l : tensor<1x4096xf16>
    weft.yield %s : tensor<1x4096xf16>
  }
  return %r : tensor<1x4096xf16>
}
func.func @o_proj_t2(%x: tensor<2x4096xf16>, %h: tensor<2x4096xf16>) -> tensor<2x4096xf16> {
  %w = weft.weight "attn.o" {quant = #weft.quant<bits = 4, group = 128>} : tensor<4096x4096xf16>
  %r = weft.fusion "linear_residual" (%x, %w, %h) {dims = {k = 4096 : i64, n = 4096 : i64, tokens = 2 : i64, width = 4096 : i64}}
      : (tensor<2x4096xf16>, tensor<4096x4096xf16>, tensor<2x4096xf16>) -> tensor<2x4096xf16> {
  ^bb0(%a: tensor<2x4096xf16>, %b: tensor<4096x4096xf16>, %c: tensor<2x4096xf16>):
    %l = weft.linear %a, %b : (tensor<2x4096xf16>, tensor<4096x4096xf16>) -> tensor<2x4096xf16>
    %s = weft.add %c, %l : tensor<2x4096xf16>
    weft.yield %s : tensor<2x4096xf16>
  }
  return %r : tensor<2x4096xf16>
}

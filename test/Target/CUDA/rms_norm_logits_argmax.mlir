// Final norm + LM head + greedy selection: a logits GEMV that leaves one
// (logit, index) candidate per block and token, then a kernel that picks
// the best; for prefill, a GEMM to f32 logits and an argmax per row.
// RUN: weft-emit-cuda --function=decode %s | FileCheck %s
// RUN: weft-emit-cuda --function=prefill --no-source %s | FileCheck %s --check-prefix=PREFILL

// CHECK-LABEL: // @decode region 0 "rms_norm_logits_argmax": 2 steps
// CHECK-NEXT: // step 0: kernel [[GEMV:weft_rms_norm_logits_argmax_t2_k256_n32000_gemv_[0-9a-f]+]]
// CHECK-NEXT: //   grid (1000, 1, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 x: RegionInput 0
// CHECK-NEXT: //   param 1 norm_w: RegionInput 1
// CHECK-NEXT: //   param 2 w: RegionInput 2
// CHECK-NEXT: //   param 3 w_scales: Scalar = 0
// CHECK-NEXT: //   param 4 candidates: Scratch 1 (16000 bytes)
// CHECK-NEXT: //   param 5 logits: RegionResult 0
// ARGMAX: the epilogue also makes each column's argmax key
// (weft/epilogue.cuh's ColumnEpilogue).
// CHECK: static constexpr bool NORM = true, PRENORM = false, MMA = false, ARGMAX = true;
// CHECK: using Epilogue = weft::kernels::ColumnEpilogue<weft::kernels::NoBias, weft::kernels::Sum,
// CHECK-NEXT: weft::kernels::Columns<0, 32000, 0, 1>>;
// CHECK: // entry: weft::kernels::gemvKernel<Config, float>
// CHECK: // step 1: kernel [[PICK:weft_argmax_candidates_t2_b1000_[0-9a-f]+]]
// CHECK-NEXT: //   grid (2, 1, 1) block (256, 1, 1) shared 0
// CHECK-NEXT: //   param 0 candidates: Scratch 1 (16000 bytes)
// CHECK-NEXT: //   param 1 ids: RegionResult 1
// CHECK: static constexpr int T = 2, BLOCKS = 1000, THREADS = 256;
// CHECK: // entry: weft::kernels::argmaxCandidatesKernel<Config, int>
func.func @decode(%x: tensor<2x256xbf16>, %wn: tensor<256xbf16>, %head: tensor<32000x256xbf16>)
    -> (tensor<2x32000xf32>, tensor<2xi32>) {
  %r:2 = weft.fusion "rms_norm_logits_argmax" (%x, %wn, %head) {dims = {hidden = 256 : i64, tokens = 2 : i64, vocab = 32000 : i64}}
      : (tensor<2x256xbf16>, tensor<256xbf16>, tensor<32000x256xbf16>) -> (tensor<2x32000xf32>, tensor<2xi32>) {
  ^bb0(%a: tensor<2x256xbf16>, %b: tensor<256xbf16>, %c: tensor<32000x256xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<2x256xbf16>, tensor<256xbf16>) -> tensor<2x256xbf16>
    %l = weft.logits %n, %c : (tensor<2x256xbf16>, tensor<32000x256xbf16>) -> tensor<2x32000xf32>
    %t = weft.argmax %l : tensor<2x32000xf32> -> tensor<2xi32>
    weft.yield %l, %t : tensor<2x32000xf32>, tensor<2xi32>
  }
  return %r#0, %r#1 : tensor<2x32000xf32>, tensor<2xi32>
}

// PREFILL-LABEL: // @prefill region 0 "rms_norm_logits_argmax": 3 steps
// PREFILL-NEXT: // step 0: kernel weft_rms_norm_k256_{{[0-9a-f]+}}
// PREFILL: // step 1: gemm m 20 n 32000 k 256 (bf16 x bf16 -> f32)
// PREFILL-NEXT: //   a normalized: Scratch 0 (10240 bytes)
// PREFILL-NEXT: //   b w: RegionInput 2
// PREFILL-NEXT: //   c logits: RegionResult 0
// PREFILL-NEXT: // step 2: kernel weft_argmax_rows_v32000_{{[0-9a-f]+}}
// PREFILL-NEXT: //   grid (20, 1, 1) block (256, 1, 1) shared 0
// PREFILL-NEXT: //   param 0 logits: RegionResult 0
// PREFILL-NEXT: //   param 1 ids: RegionResult 1
func.func @prefill(%x: tensor<20x256xbf16>, %wn: tensor<256xbf16>, %head: tensor<32000x256xbf16>)
    -> (tensor<20x32000xf32>, tensor<20xi32>) {
  %r:2 = weft.fusion "rms_norm_logits_argmax" (%x, %wn, %head) {dims = {hidden = 256 : i64, tokens = 20 : i64, vocab = 32000 : i64}}
      : (tensor<20x256xbf16>, tensor<256xbf16>, tensor<32000x256xbf16>) -> (tensor<20x32000xf32>, tensor<20xi32>) {
  ^bb0(%a: tensor<20x256xbf16>, %b: tensor<256xbf16>, %c: tensor<32000x256xbf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<20x256xbf16>, tensor<256xbf16>) -> tensor<20x256xbf16>
    %l = weft.logits %n, %c : (tensor<20x256xbf16>, tensor<32000x256xbf16>) -> tensor<20x32000xf32>
    %t = weft.argmax %l : tensor<20x32000xf32> -> tensor<20xi32>
    weft.yield %l, %t : tensor<20x32000xf32>, tensor<20xi32>
  }
  return %r#0, %r#1 : tensor<20x32000xf32>, tensor<20xi32>
}

// A small vocabulary over a wide input splits K; the kernel that adds the
// partials also leaves the argmax candidates.
// RUN: weft-emit-cuda --function=split_k --no-source --compile=sm_86 %s | FileCheck %s --check-prefix=SPLIT
// SPLIT-LABEL: // @split_k region 0 "rms_norm_logits_argmax": 3 steps
// SPLIT-NEXT: // step 0: kernel weft_rms_norm_logits_argmax_t1_k4096_n64_splitk_{{[0-9a-f]+}}
// SPLIT-NEXT: //   grid (2, 8, 1) block (256, 1, 1) shared 0
// SPLIT: //   param 4 partials: Scratch 0 (2080 bytes)
// SPLIT-NEXT: //   compiled for sm_86: cubin ok, ptx ok, symbol {{.*}}gemvSplitKernel
// SPLIT-NEXT: // step 1: kernel weft_rms_norm_logits_argmax_t1_k4096_n64_reduce_{{[0-9a-f]+}}
// SPLIT-NEXT: //   grid (2, 1, 1) block (256, 1, 1) shared 0
// SPLIT-NEXT: //   param 0 partials: Scratch 0 (2080 bytes)
// SPLIT-NEXT: //   param 1 candidates: Scratch 1 (16 bytes)
// SPLIT-NEXT: //   param 2 logits: RegionResult 0
// SPLIT-NEXT: //   compiled for sm_86: cubin ok, ptx ok, symbol {{.*}}gemvReduceKernel
// SPLIT-NEXT: // step 2: kernel weft_argmax_candidates_t1_b2_{{[0-9a-f]+}}
// SPLIT: //   compiled for sm_86: cubin ok, ptx ok
func.func @split_k(%x: tensor<1x4096xf16>, %wn: tensor<4096xf16>, %head: tensor<64x4096xf16>)
    -> (tensor<1x64xf32>, tensor<1xi32>) {
  %r:2 = weft.fusion "rms_norm_logits_argmax" (%x, %wn, %head) {dims = {hidden = 4096 : i64, tokens = 1 : i64, vocab = 64 : i64}}
      : (tensor<1x4096xf16>, tensor<4096xf16>, tensor<64x4096xf16>) -> (tensor<1x64xf32>, tensor<1xi32>) {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096xf16>, %c: tensor<64x4096xf16>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64} : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
    %l = weft.logits %n, %c : (tensor<1x4096xf16>, tensor<64x4096xf16>) -> tensor<1x64xf32>
    %t = weft.argmax %l : tensor<1x64xf32> -> tensor<1xi32>
    weft.yield %l, %t : tensor<1x64xf32>, tensor<1xi32>
  }
  return %r#0, %r#1 : tensor<1x64xf32>, tensor<1xi32>
}

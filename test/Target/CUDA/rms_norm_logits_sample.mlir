// Final norm + LM head + weft.sample: the logits GEMV, then one block of
// 1024 threads per token that applies temperature, top-k and top-p and
// picks the token where the cumulative probability passes `uniform`.
// RUN: weft-emit-cuda %s | FileCheck %s

// CHECK-LABEL: // @decode region 0 "rms_norm_logits_sample": 2 steps
// CHECK-NEXT: // step 0: kernel weft_rms_norm_logits_sample_t1_k512_n152064_gemv_{{[0-9a-f]+}}
// CHECK-NEXT: //   grid (4752, 1, 1) block (256, 1, 1) shared 0
// Sampling needs no argmax candidates: a null parameter.
// CHECK: //   param 4 candidates: Scalar = 0
// CHECK-NEXT: //   param 5 logits: RegionResult 0
// CHECK: ARGMAX = false;
// CHECK: // step 1: kernel [[NAME:weft_sample_v152064_[0-9a-f]+]]
// CHECK-NEXT: //   grid (1, 1, 1) block (1024, 1, 1) shared 0
// CHECK-NEXT: //   param 0 logits: RegionResult 0
// CHECK-NEXT: //   param 1 temperature: RegionInput 3
// CHECK-NEXT: //   param 2 top_k: RegionInput 4
// CHECK-NEXT: //   param 3 top_p: RegionInput 5
// CHECK-NEXT: //   param 4 uniform: RegionInput 6
// CHECK-NEXT: //   param 5 ids: RegionResult 1
// CHECK: #include "weft/sample.cuh"
// CHECK: static constexpr int V = 152064;
// CHECK: static constexpr int CAP = 2048;
// CHECK: static constexpr bool RELEASE_EARLY = false;
// CHECK: // entry: weft::kernels::sampleRowsKernel<Config, int>
func.func @decode(%x: tensor<1x512xbf16>, %wn: tensor<512xbf16>, %head: tensor<152064x512xbf16>,
                  %temp: tensor<1xf32>, %k: tensor<1xi32>, %p: tensor<1xf32>, %u: tensor<1xf32>)
    -> (tensor<1x152064xf32>, tensor<1xi32>) {
  %r:2 = weft.fusion "rms_norm_logits_sample" (%x, %wn, %head, %temp, %k, %p, %u) {dims = {hidden = 512 : i64, tokens = 1 : i64, vocab = 152064 : i64}}
      : (tensor<1x512xbf16>, tensor<512xbf16>, tensor<152064x512xbf16>, tensor<1xf32>, tensor<1xi32>, tensor<1xf32>, tensor<1xf32>)
      -> (tensor<1x152064xf32>, tensor<1xi32>) {
  ^bb0(%a: tensor<1x512xbf16>, %b: tensor<512xbf16>, %c: tensor<152064x512xbf16>, %t0: tensor<1xf32>, %t1: tensor<1xi32>, %t2: tensor<1xf32>, %t3: tensor<1xf32>):
    %n = weft.rms_norm %a, %b {epsilon = 1.0e-06 : f64} : (tensor<1x512xbf16>, tensor<512xbf16>) -> tensor<1x512xbf16>
    %l = weft.logits %n, %c : (tensor<1x512xbf16>, tensor<152064x512xbf16>) -> tensor<1x152064xf32>
    %s = weft.sample %l, %t0, %t1, %t2, %t3
        : (tensor<1x152064xf32>, tensor<1xf32>, tensor<1xi32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1xi32>
    weft.yield %l, %s : tensor<1x152064xf32>, tensor<1xi32>
  }
  return %r#0, %r#1 : tensor<1x152064xf32>, tensor<1xi32>
}

// RUN: weft-opt %s | FileCheck %s
// RUN: weft-opt %s | weft-opt | FileCheck %s

// Tests that plan kernels, buckets, buffers and steps round-trip.

// CHECK: plan.kernel @embed {archs = ["sm_90"], block = array<i64: 256, 1, 1>, entry = "embed", grid = array<i64: 2, 1, 1>, params = [], region = "embedding", shared = 0 : i64}
// CHECK-NEXT: plan.kernel @accumulate {archs = ["sm_90"], block = array<i64: 256, 1, 1>, entry = "accumulate", grid = array<i64: 16, 1, 1>, params = [], region = "all_reduce", shared = 0 : i64}
// CHECK-NEXT: plan.bucket "decode_b1" attributes {prefill = false, tokens = 1 : i64} {
// CHECK-NEXT: plan.buffer {bytes = 8192 : i64, device = 0 : i64, index = 0 : i64, offset = 0 : i64}
// CHECK-NEXT: plan.buffer {bytes = 8192 : i64, device = 1 : i64, index = 0 : i64, offset = 0 : i64}
// CHECK-NEXT: plan.buffer {bytes = 8192 : i64, device = 1 : i64, index = 1 : i64, offset = 8192 : i64}
// CHECK-NEXT: plan.buffer {bytes = 8192 : i64, device = 2 : i64, index = 0 : i64, offset = 0 : i64}
// CHECK-NEXT: plan.launch {args = [#plan.arg<kind = weight, index = 0, offset = 0, value = 0>, #plan.arg<kind = input, index = 0, offset = 0, value = 0>, #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>], block = array<i64: 256, 1, 1>, device = 0 : i64, grid = array<i64: 2, 1, 1>, kernel = @embed, region = "embedding", shared = 0 : i64}
// CHECK-NEXT: plan.copy {bytes = 8192 : i64, source = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, source_device = 0 : i64, target = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, target_device = 1 : i64}
// CHECK-NEXT: plan.gemm {a = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, b = #plan.arg<kind = weight, index = 1, offset = 0, value = 0>, c = #plan.arg<kind = input, index = 4, offset = 0, value = 0>, c_dtype = #plan.dtype<f32>, device = 1 : i64, dtype = #plan.dtype<bf16>, k = 4096 : i64, m = 1 : i64, n = 128256 : i64, region = "rms_norm_logits_argmax"}
// CHECK-NEXT: plan.all_reduce {accumulate_kernel = @accumulate, buffers = [#plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>], count = 4096 : i64, device = 1 : i64, devices = array<i64: 1, 2>, dtype = #plan.dtype<bf16>, scratch = #plan.arg<kind = buffer, index = 1, offset = 0, value = 0>}
plan.kernel @embed {archs = ["sm_90"], block = array<i64: 256, 1, 1>, entry = "embed", grid = array<i64: 2, 1, 1>, params = [], region = "embedding", shared = 0 : i64}
plan.kernel @accumulate {archs = ["sm_90"], block = array<i64: 256, 1, 1>, entry = "accumulate", grid = array<i64: 16, 1, 1>, params = [], region = "all_reduce", shared = 0 : i64}
plan.bucket "decode_b1" attributes {prefill = false, tokens = 1 : i64} {
  plan.buffer {bytes = 8192 : i64, device = 0 : i64, index = 0 : i64, offset = 0 : i64}
  plan.buffer {bytes = 8192 : i64, device = 1 : i64, index = 0 : i64, offset = 0 : i64}
  plan.buffer {bytes = 8192 : i64, device = 1 : i64, index = 1 : i64, offset = 8192 : i64}
  plan.buffer {bytes = 8192 : i64, device = 2 : i64, index = 0 : i64, offset = 0 : i64}
  plan.launch {args = [#plan.arg<kind = weight, index = 0, offset = 0, value = 0>, #plan.arg<kind = input, index = 0, offset = 0, value = 0>, #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>], block = array<i64: 256, 1, 1>, device = 0 : i64, grid = array<i64: 2, 1, 1>, kernel = @embed, region = "embedding", shared = 0 : i64}
  plan.copy {bytes = 8192 : i64, source = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, source_device = 0 : i64, target = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, target_device = 1 : i64}
  plan.gemm {a = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, b = #plan.arg<kind = weight, index = 1, offset = 0, value = 0>, c = #plan.arg<kind = input, index = 4, offset = 0, value = 0>, c_dtype = #plan.dtype<f32>, device = 1 : i64, dtype = #plan.dtype<bf16>, k = 4096 : i64, m = 1 : i64, n = 128256 : i64, region = "rms_norm_logits_argmax"}
  plan.all_reduce {accumulate_kernel = @accumulate, buffers = [#plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>], count = 4096 : i64, device = 1 : i64, devices = array<i64: 1, 2>, dtype = #plan.dtype<bf16>, scratch = #plan.arg<kind = buffer, index = 1, offset = 0, value = 0>}
}

// RUN: weft-opt %s --plan-assign-buffers | FileCheck %s

// Tests buffer placement by liveness: buffers live at the same time never
// share bytes; a buffer first named after another's last use reuses its
// bytes; sizes round up to 256 bytes; each device has its own arena.

// CHECK-LABEL: plan.bucket "decode_b1"
// Buffer 0 (1000 bytes, steps 0-1) is placed first at 0 and takes 1024.
// CHECK-NEXT: plan.buffer {bytes = 1000 : i64, device = 0 : i64, index = 0 : i64, offset = 0 : i64}
// Buffer 1 (512 bytes, steps 0-2) overlaps buffer 0: after it.
// CHECK-NEXT: plan.buffer {bytes = 512 : i64, device = 0 : i64, index = 1 : i64, offset = 1024 : i64}
// Buffer 2 (768 bytes, step 2 only): buffer 0 is dead by then, so offset 0.
// CHECK-NEXT: plan.buffer {bytes = 768 : i64, device = 0 : i64, index = 2 : i64, offset = 0 : i64}
// Device 1 starts its own arena at 0.
// CHECK-NEXT: plan.buffer {bytes = 256 : i64, device = 1 : i64, index = 0 : i64, offset = 0 : i64}
plan.kernel @k {archs = ["sm_90"], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}
plan.bucket "decode_b1" attributes {prefill = false, tokens = 1 : i64} {
  plan.buffer {bytes = 1000 : i64, device = 0 : i64, index = 0 : i64}
  plan.buffer {bytes = 512 : i64, device = 0 : i64, index = 1 : i64}
  plan.buffer {bytes = 768 : i64, device = 0 : i64, index = 2 : i64}
  plan.buffer {bytes = 256 : i64, device = 1 : i64, index = 0 : i64}
  plan.launch {args = [#plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, #plan.arg<kind = buffer, index = 1, offset = 0, value = 0>], block = array<i64: 32, 1, 1>, device = 0 : i64, grid = array<i64: 1, 1, 1>, kernel = @k, region = "x", shared = 0 : i64}
  plan.copy {bytes = 256 : i64, source = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, source_device = 0 : i64, target = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, target_device = 1 : i64}
  plan.launch {args = [#plan.arg<kind = buffer, index = 1, offset = 0, value = 0>, #plan.arg<kind = buffer, index = 2, offset = 0, value = 0>], block = array<i64: 32, 1, 1>, device = 0 : i64, grid = array<i64: 1, 1, 1>, kernel = @k, region = "x", shared = 0 : i64}
}

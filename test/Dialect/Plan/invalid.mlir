// RUN: weft-opt %s --split-input-file --verify-diagnostics

// Tests that argument kinds are checked.
plan.kernel @k {archs = ["sm_90"], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  // expected-error @+2 {{expected ::weft::plan_ir::ArgKind to be one of: buffer, weight, k_cache, v_cache, input, scalar}}
  // expected-error @+1 {{failed to parse Plan_ArgAttr parameter 'kind'}}
  plan.launch {args = [#plan.arg<kind = tensor, index = 0, offset = 0, value = 0>], block = array<i64: 32, 1, 1>, device = 0 : i64, grid = array<i64: 1, 1, 1>, kernel = @k, region = "x", shared = 0 : i64}
}

// -----

// Tests that a buffer argument names a buffer of its device.
plan.kernel @k {archs = ["sm_90"], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  plan.buffer {bytes = 256 : i64, device = 0 : i64, index = 0 : i64, offset = 0 : i64}
  // expected-error @+1 {{buffer 1 is not a buffer of device 0 (it has 1)}}
  plan.launch {args = [#plan.arg<kind = buffer, index = 1, offset = 0, value = 0>], block = array<i64: 32, 1, 1>, device = 0 : i64, grid = array<i64: 1, 1, 1>, kernel = @k, region = "x", shared = 0 : i64}
}

// -----

// Tests launch limits.
plan.kernel @k {archs = ["sm_90"], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  // expected-error @+1 {{a block of 2048 threads (expected 1 to 1024)}}
  plan.launch {args = [], block = array<i64: 2048, 1, 1>, device = 0 : i64, grid = array<i64: 1, 1, 1>, kernel = @k, region = "x", shared = 0 : i64}
}

// -----

// Tests that a copy goes between two devices.
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  plan.buffer {bytes = 256 : i64, device = 0 : i64, index = 0 : i64, offset = 0 : i64}
  // expected-error @+1 {{source and target are the same device}}
  plan.copy {bytes = 256 : i64, source = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, source_device = 0 : i64, target = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>, target_device = 0 : i64}
}

// -----

// Tests that buffers are listed in index order per device.
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  // expected-error @+1 {{index 1 out of order (expected 0)}}
  plan.buffer {bytes = 256 : i64, device = 0 : i64, index = 1 : i64, offset = 0 : i64}
}

// -----

// Tests that an all-reduce names one buffer per device of its group.
plan.kernel @k {archs = ["sm_90"], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  plan.buffer {bytes = 256 : i64, device = 0 : i64, index = 0 : i64, offset = 0 : i64}
  // expected-error @+1 {{1 buffers for 2 devices (expected one per device)}}
  plan.all_reduce {accumulate_kernel = @k, buffers = [#plan.arg<kind = buffer, index = 0, offset = 0, value = 0>], count = 64 : i64, device = 0 : i64, devices = array<i64: 0, 1>, dtype = #plan.dtype<f16>, scratch = #plan.arg<kind = buffer, index = 0, offset = 0, value = 0>}
}

// -----

// Tests that rank 0 runs an all-reduce.
plan.kernel @k {archs = ["sm_90"], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  // expected-error @+1 {{runs on rank 0 of its group, device 0}}
  plan.all_reduce {accumulate_kernel = @k, buffers = [], count = 64 : i64, device = 1 : i64, devices = array<i64: 0, 1>, dtype = #plan.dtype<f16>, scratch = #plan.arg<kind = scalar, index = 0, offset = 0, value = 0>}
}

// -----

// Tests that a kernel is compiled for some architecture.
// expected-error @+1 {{is compiled for no architecture}}
plan.kernel @k {archs = [], block = array<i64: 32, 1, 1>, entry = "k", grid = array<i64: 1, 1, 1>, params = [], region = "x", shared = 0 : i64}

// -----

// Tests that a weight's shard axis is one of its dimensions.
// expected-error @+1 {{shard_axis 2 of a rank-2 weight}}
plan.weight {devices = array<i64: 0>, dtype = #plan.dtype<f16>, name = "w", shape = array<i64: 4, 4>, shard_axis = 2 : i64, shard_parts = 2 : i64, sources = [#plan.source<name = "w", shape = [4, 4]>]}

// -----

// Tests that element types are checked.
// expected-error @+2 {{expected ::weft::plan_ir::DType to be one of: f32, f16, bf16, fp8_e4m3, i8, i4, i32, i64}}
// expected-error @+1 {{failed to parse Plan_DTypeAttr parameter 'value'}}
plan.weight {devices = array<i64: 0>, dtype = #plan.dtype<f64>, name = "w", shape = array<i64: 4>, shard_axis = -1 : i64, shard_parts = 1 : i64, sources = []}

// -----

// Tests that a launch names a kernel of the module.
plan.bucket "b" attributes {prefill = false, tokens = 1 : i64} {
  // expected-error @+1 {{kernel @missing is not a plan.kernel of the module}}
  plan.launch {args = [], block = array<i64: 32, 1, 1>, device = 0 : i64, grid = array<i64: 1, 1, 1>, kernel = @missing, region = "x", shared = 0 : i64}
}

// RUN: weft-opt %s --split-input-file --verify-diagnostics

// Tests that a transfer goes between two different devices.
func.func @transfer_self(%x: tensor<4x64xf16>) {
  // expected-error @+1 {{source and target are both device 1}}
  %t = dist.transfer %x {source = 1 : i64, target = 1 : i64} : tensor<4x64xf16>
  return
}

// -----

// Tests that an all-reduce needs a group.
func.func @all_reduce_one(%x: tensor<4x64xf16>) {
  // expected-error @+1 {{needs a group of at least 2 devices}}
  %t = dist.all_reduce %x {devices = array<i64: 0>} : tensor<4x64xf16>
  return
}

// -----

// Tests that a device appears once in a group.
func.func @all_reduce_dup(%x: tensor<4x64xf16>) {
  // expected-error @+1 {{device 1 is listed twice}}
  %t = dist.all_reduce %x {devices = array<i64: 1, 1>} : tensor<4x64xf16>
  return
}

// -----

// Tests the shard attribute's checks.
func.func @shard_axis() {
  // expected-error @+1 {{shard axis must be 0 or 1, got 2}}
  %w = weft.weight "w" {dist.shard = #dist.shard<axis = 2, parts = 2>} : tensor<64x64xf16>
  return
}

// -----

func.func @shard_parts() {
  // expected-error @+1 {{a shard needs at least 2 parts, got 1}}
  %w = weft.weight "w" {dist.shard = #dist.shard<axis = 0, parts = 1>} : tensor<64x64xf16>
  return
}

// -----

// Tests the placement attribute's checks.
func.func @placement(%x: tensor<4x64xf16>) {
  // expected-error @+1 {{stage must be non-negative, got -1}}
  %s = weft.fusion "silu" (%x) {dist.placement = #dist.placement<stage = -1, devices = [0]>} : (tensor<4x64xf16>) -> tensor<4x64xf16> {
  ^bb0(%a: tensor<4x64xf16>):
    %b = weft.silu %a : tensor<4x64xf16>
    weft.yield %b : tensor<4x64xf16>
  }
  return
}

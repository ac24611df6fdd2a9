// RUN: weft-opt %s | FileCheck %s
// RUN: weft-opt %s | weft-opt | FileCheck %s
// RUN: weft-opt %s --mlir-print-op-generic | weft-opt | FileCheck %s

// Tests that dist attributes and ops round-trip.

// CHECK-LABEL: func.func @stages
// CHECK: weft.weight "down.weight" {dist.shard = #dist.shard<axis = 1, parts = 2>} : tensor<64x128xf16>
// CHECK: dist.all_reduce %{{.+}} {devices = array<i64: 0, 1>} : tensor<?x64xf16>
// CHECK: dist.transfer %{{.+}} {source = 1 : i64, target = 2 : i64} : tensor<?x64xf16>
// CHECK: weft.fusion "silu" (%{{.+}}) {dist.placement = #dist.placement<stage = 1, devices = [2]>}
func.func @stages(%x: tensor<?x128xf16>) -> tensor<?x64xf16> {
  %w = weft.weight "down.weight" {dist.shard = #dist.shard<axis = 1, parts = 2>} : tensor<64x128xf16>
  %y = weft.linear %x, %w : (tensor<?x128xf16>, tensor<64x128xf16>) -> tensor<?x64xf16>
  %r = dist.all_reduce %y {devices = array<i64: 0, 1>} : tensor<?x64xf16>
  %t = dist.transfer %r {source = 1 : i64, target = 2 : i64} : tensor<?x64xf16>
  %s = weft.fusion "silu" (%t) {dist.placement = #dist.placement<stage = 1, devices = [2]>} : (tensor<?x64xf16>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x64xf16>):
    %b = weft.silu %a : tensor<?x64xf16>
    weft.yield %b : tensor<?x64xf16>
  }
  return %s : tensor<?x64xf16>
}

//===- WeftInterfaces.td - What weft ops mean to the analyses -*- tablegen -*-===//
//
// Each analysis asks an op through an interface instead of a chain of casts,
// so a new op states in one place (WeftOpInterfaces.cpp) the dimensions it
// names, what it costs and how it splits over tensor-parallel devices. An op
// without an interface contributes nothing to the first two and cannot run
// tensor parallel.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_TD
#define WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_TD

include "mlir/IR/OpBase.td"

def Weft_RegionDimsOpInterface : OpInterface<"RegionDimsOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    The model dimensions an op fixes, which its fusion region records in its
    `dims` dictionary (kernel names, the fused report and the checks of the
    kernel emitter read them).
  }];
  let methods = [
    InterfaceMethod<"Calls `add(name, value)` for each dimension the op fixes.",
      "void", "recordDims",
      (ins "::llvm::function_ref<void(::llvm::StringRef, int64_t)>":$add)>,
  ];
}

def Weft_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    The arithmetic and KV-cache traffic of an op for a token count (the
    region's weights and activations are counted from its operands by the
    cost analysis); attention gives its terms per cached position, so that
    callers can vary the context.
  }];
  let methods = [
    InterfaceMethod<"The op's cost for `tokens` tokens.",
      "::weft::OpCost", "estimateCost", (ins "double":$tokens)>,
  ];
}

def Weft_TensorParallelOpInterface : OpInterface<"TensorParallelOpInterface"> {
  let cppNamespace = "::weft";
  let description = [{
    How an op runs on one of `parts` tensor-parallel devices: called on a
    clone whose operands already have their per-device types, it sets the
    attributes and result types of the device's share (a column-parallel
    projection's narrower output, a head count divided by `parts`).
  }];
  let methods = [
    InterfaceMethod<[{Rewrites the clone for `parts` devices; returns what
      does not divide ("num_heads 14 does not split 4 ways"), empty on
      success.}],
      "std::string", "shardForDevices", (ins "int64_t":$parts)>,
  ];
}

#endif // WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_TD

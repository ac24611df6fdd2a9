//===- ReferenceInterface.td - Reference semantics of ops -*- tablegen -*-===//
//
// What an op computes, to the CPU reference interpreter. The interface is
// the interpreter's, not the dialects': compiler/Reference attaches it to
// the weft and dist ops as external models (attachReferenceSemantics), so
// the dialects stay free of interpreter types.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_COMPILER_REFERENCE_REFERENCEINTERFACE_TD
#define WEFT_COMPILER_REFERENCE_REFERENCEINTERFACE_TD

include "mlir/IR/OpBase.td"

def ReferenceOpInterface : OpInterface<"ReferenceOpInterface"> {
  let cppNamespace = "::weft::reference";
  let description = [{
    An op the reference interpreter can run: `evaluate` computes its results
    from its operands' values (f32 or integer tensors, one per operand, in
    order; a KV-cache operand is a token, the cache being the evaluator's
    state). A new op gets its semantics by a method of `Evaluator` and one
    entry in `attachReferenceSemantics` (Interpreter.cpp).
  }];
  let methods = [
    InterfaceMethod<"Computes the op's results from its operands' values.",
      "::weft::reference::Results", "evaluate",
      (ins "::weft::reference::Evaluator &":$evaluator,
           "::weft::reference::Operands":$operands)>,
  ];
}

#endif // WEFT_COMPILER_REFERENCE_REFERENCEINTERFACE_TD

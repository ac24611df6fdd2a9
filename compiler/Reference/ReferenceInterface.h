// ReferenceOpInterface: what an op computes, to the reference interpreter.
#ifndef WEFT_COMPILER_REFERENCE_REFERENCEINTERFACE_H_
#define WEFT_COMPILER_REFERENCE_REFERENCEINTERFACE_H_

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace weft::reference {

struct Tensor;
class Evaluator; // Interpreter.cpp: runs blocks, holds the weights and the KV cache

using TensorRef = std::shared_ptr<const Tensor>;
using Operands = llvm::ArrayRef<const Tensor *>;
using Results = llvm::Expected<std::vector<TensorRef>>;

// Attaches ReferenceOpInterface to every weft and dist op with reference
// semantics (loading both dialects into `context`); repeated calls are
// harmless.
void attachReferenceSemantics(mlir::MLIRContext &context);

} // namespace weft::reference

#include "compiler/Reference/ReferenceInterface.h.inc"

#endif // WEFT_COMPILER_REFERENCE_REFERENCEINTERFACE_H_

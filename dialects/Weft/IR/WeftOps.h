// Types and ops of the weft dialect.
#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_H_
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_H_

#include "dialects/Weft/IR/WeftDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/Error.h"

#include <vector>

#include "dialects/Weft/IR/WeftEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Weft/IR/WeftAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/Weft/IR/WeftTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/Weft/IR/WeftOps.h.inc"

namespace weft {
// How a weight value is stored quantized: the `quant` of a weft.weight, or
// of the parts of a weft.weight_concat (fusion concatenates only weights
// stored alike); null for 16-bit weights and for activations.
QuantAttr quantOf(mlir::Value weight);
} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_H_

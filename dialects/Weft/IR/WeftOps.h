// Types and ops of the weft dialect.
#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_H_
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_H_

#include "dialects/Weft/IR/WeftDialect.h"
#include "dialects/Weft/IR/WeftInterfaces.h"
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
// The argument attribute that marks a function argument as a quantized
// weight (a region cloned per tensor-parallel rank takes its weights as
// arguments).
inline constexpr llvm::StringLiteral kQuantArgAttr = "weft.quant";
// How a weight value is stored quantized: the `quant` of a weft.weight, of
// the parts of a weft.weight_concat (fusion concatenates only weights
// stored alike), or the kQuantArgAttr of a function argument; null for
// 16-bit weights and for activations.
QuantAttr quantOf(mlir::Value weight);
// Whether an [out, in] weight of `bits`-bit codes is stored in tiles
// (#weft.quant's `tiled`): 4-bit integer codes, out a multiple of 16 and in
// of 128.
bool codesTileable(int64_t bits, QuantFormat format, int64_t out, int64_t in);
} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_H_

// The dist dialect: placement, weight shards, transfers and collectives.
#ifndef WEFT_DIALECT_DIST_IR_DISTDIALECT_H_
#define WEFT_DIALECT_DIST_IR_DISTDIALECT_H_

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Dist/IR/DistDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/IR/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/Dist/IR/DistOps.h.inc"

#endif // WEFT_DIALECT_DIST_IR_DISTDIALECT_H_

// The plan dialect: buffers and steps of a compiled plan.
#ifndef WEFT_DIALECT_PLAN_IR_PLANDIALECT_H_
#define WEFT_DIALECT_PLAN_IR_PLANDIALECT_H_

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "dialects/Plan/IR/PlanDialect.h.inc"

namespace weft::plan_ir {
// Buffers start on this boundary in their device's arena
// (plan-assign-buffers), and an arena's size is a multiple of it.
constexpr uint64_t kBufferAlignment = 256;
inline uint64_t alignToBuffer(uint64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}
} // namespace weft::plan_ir

#include "dialects/Plan/IR/PlanEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Plan/IR/PlanAttrs.h.inc"

#include "dialects/Plan/IR/PlanInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Plan/IR/PlanOps.h.inc"

#endif // WEFT_DIALECT_PLAN_IR_PLANDIALECT_H_

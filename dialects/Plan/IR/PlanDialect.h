// The plan dialect: buffers and steps of a compiled plan.
#ifndef WEFT_DIALECT_PLAN_IR_PLANDIALECT_H_
#define WEFT_DIALECT_PLAN_IR_PLANDIALECT_H_

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

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

namespace weft::plan_ir {
// Bytes of `elements` values of type `t` as stored (i4: two per byte).
inline uint64_t storedBytes(DType t, uint64_t elements) {
  switch (t) {
  case DType::F32:
  case DType::I32: return elements * 4;
  case DType::I64: return elements * 8;
  case DType::I8:
  case DType::FP8_E4M3: return elements;
  case DType::I4: return elements / 2;
  case DType::F16:
  case DType::BF16: return elements * 2;
  }
  return elements * 2;
}
} // namespace weft::plan_ir

#define GET_ATTRDEF_CLASSES
#include "dialects/Plan/IR/PlanAttrs.h.inc"

#include "dialects/Plan/IR/PlanInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Plan/IR/PlanOps.h.inc"

#endif // WEFT_DIALECT_PLAN_IR_PLANDIALECT_H_

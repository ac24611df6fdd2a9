// Passes over the plan dialect.
#ifndef WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_H_
#define WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_H_

#include "dialects/Plan/IR/PlanDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace weft::plan_ir {

#define GEN_PASS_DECL
#include "dialects/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Plan/Transforms/Passes.h.inc"

// What plan-assign-buffers does to one bucket.
mlir::LogicalResult assignBufferOffsets(BucketOp bucket);

} // namespace weft::plan_ir

#endif // WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_H_

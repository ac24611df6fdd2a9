// Passes over the plan dialect.
#ifndef WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_H_
#define WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_H_

#include "dialects/Plan/IR/PlanDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <map>

namespace weft::plan_ir {

#define GEN_PASS_DECL
#include "dialects/Plan/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dialects/Plan/Transforms/Passes.h.inc"

// Per device, the bytes of the arena's zeroed region: the most that one
// bucket's zeroed buffers take, each rounded up to alignToBuffer.
std::map<int64_t, uint64_t> zeroedRegions(mlir::ModuleOp module);

// What plan-assign-buffers does to one bucket, given zeroedRegions of its
// module.
mlir::LogicalResult assignBufferOffsets(BucketOp bucket,
                                        const std::map<int64_t, uint64_t> &zeroedRegion);

} // namespace weft::plan_ir

#endif // WEFT_DIALECT_PLAN_TRANSFORMS_PASSES_H_

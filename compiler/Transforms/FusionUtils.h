// Shared machinery of the fusion passes: moving a group of ops into one
// weft.fusion region, and the small queries the patterns use.
#ifndef WEFT_COMPILER_TRANSFORMS_FUSIONUTILS_H_
#define WEFT_COMPILER_TRANSFORMS_FUSIONUTILS_H_

#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/PatternMatch.h"

namespace weft {

// Moves `ops` (all in one block; weft.fusion ops among them are flattened
// into the new body) into a new weft.fusion of `kind`, inserted after the
// last of them. Values defined outside the group become inputs; values used
// outside become results. Fails, changing nothing, when the move would be
// illegal: a value of the group used between the group's ops, or an op with
// memory effects between them while the group has memory effects too.
mlir::FailureOr<FusionOp> fuseIntoRegion(mlir::RewriterBase &rewriter,
                                         llvm::ArrayRef<mlir::Operation *> ops,
                                         llvm::StringRef kind);

// The kind of the region `op` belongs to: a fusion's kind, or the op's name
// without the dialect prefix for an op not yet fused.
std::string regionKind(mlir::Operation *op);

// True when `value` has exactly one use, by `user`.
bool hasSingleUser(mlir::Value value, mlir::Operation *user);

} // namespace weft

#endif // WEFT_COMPILER_TRANSFORMS_FUSIONUTILS_H_

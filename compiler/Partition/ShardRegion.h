// The kernel region that one device of a tensor-parallel group runs.
//
// The partition annotates weights with `dist.shard` (column-parallel
// projections cut along their output axis, row-parallel ones along their
// input axis) and follows row-parallel regions with `dist.all_reduce`. Code
// generation needs each device's region at its shard's sizes: this clones a
// region with the inputs' shard types, re-derives every op's result type,
// divides head counts and split widths, and records the new `dims`. On every
// rank but the first, a residual added after a row-parallel projection is
// dropped, so the all-reduce adds it exactly once.
#ifndef WEFT_COMPILER_PARTITION_SHARDREGION_H_
#define WEFT_COMPILER_PARTITION_SHARDREGION_H_

#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

namespace weft::partition {

struct ShardedRegion {
  // Owns the clone: a module with one function, @shard, whose arguments
  // stand for the original region's inputs (at shard types), one for one,
  // and which returns the clone's results (so the reference interpreter can
  // run one device's share).
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp function;
  FusionOp region;
  bool droppedResidual = false; // this rank leaves the residual to rank 0
};

// Activations that earlier regions of the group left sharded (e.g. the
// per-device Q/K/V slices), with their per-device types.
using ShardedValues = llvm::DenseMap<mlir::Value, mlir::Type>;

// The type device `rank` of `parts` holds of a region input: a sharded
// weight (or a concat of sharded weights), the KV cache (kv_heads / parts)
// or a sharded activation; anything else is replicated and keeps its type.
llvm::Expected<mlir::Type> shardedInputType(mlir::Value input, int64_t parts,
                                            const ShardedValues &sharded);

// Region `region` as run by device `rank` of a group of `parts`. Fails,
// naming the op, when a size does not divide or an op cannot be sharded.
llvm::Expected<ShardedRegion> shardRegion(FusionOp region, int64_t rank, int64_t parts,
                                          const ShardedValues &sharded);

} // namespace weft::partition

#endif // WEFT_COMPILER_PARTITION_SHARDREGION_H_

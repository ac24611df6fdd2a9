// Writes a partition into the fused graph as `dist` annotations.
#ifndef WEFT_COMPILER_PARTITION_ANNOTATE_H_
#define WEFT_COMPILER_PARTITION_ANNOTATE_H_

#include "compiler/Partition/Partitioner.h"

#include "mlir/IR/BuiltinOps.h"

namespace weft::partition {

// On @forward of `module` (fused, not yet specialized): a #dist.placement
// on every region, #dist.shard on the weights of tensor-parallel stages,
// dist.all_reduce after their row-parallel projections, dist.transfer where
// an activation crosses to the next stage, and the module attribute
// `dist.partition` with the decision and its predicted figures.
mlir::LogicalResult annotatePartition(mlir::ModuleOp module,
                                      const PartitionResult &result,
                                      const hardware::Topology &topology,
                                      const PartitionOptions &options);

// The fused module profiled, partitioned over `topology` and annotated
// (annotatePartition): what weft-partition and the compiler pipeline do.
struct PartitionedModule {
  ModelProfile profile;
  PartitionResult result;
};
llvm::Expected<PartitionedModule> partitionModule(mlir::ModuleOp module,
                                                  const ModelConfig &config,
                                                  const hardware::Topology &topology,
                                                  const PartitionOptions &options);

} // namespace weft::partition

#endif // WEFT_COMPILER_PARTITION_ANNOTATE_H_

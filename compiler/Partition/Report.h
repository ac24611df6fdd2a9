// The partition report: a text table and an SVG picture of the chosen plan.
#ifndef WEFT_COMPILER_PARTITION_REPORT_H_
#define WEFT_COMPILER_PARTITION_REPORT_H_

#include "compiler/Partition/Partitioner.h"

namespace llvm {
class raw_ostream;
}

namespace weft::partition {

// The partition's first lines: what was partitioned for what, the chosen
// layout and its predicted tokens/s.
void printPartitionSummary(const PartitionResult &result,
                           const hardware::Topology &topology,
                           const PartitionOptions &options,
                           const ModelConfig &config, llvm::raw_ostream &os);

// printPartitionSummary, then layers and memory per device by category, predicted tokens/s at batch 1
// and at the declared batch, time per stage, link time, the memory-split
// baseline and the runners-up.
void printPartitionReport(const PartitionResult &result,
                          const hardware::Topology &topology,
                          const PartitionOptions &options,
                          const ModelConfig &config, llvm::raw_ostream &os);

// Memory bars per device, the layer map, time per stage.
void writePartitionSvg(const PartitionResult &result,
                       const hardware::Topology &topology,
                       const PartitionOptions &options,
                       const ModelConfig &config, llvm::raw_ostream &os);

} // namespace weft::partition

#endif // WEFT_COMPILER_PARTITION_REPORT_H_

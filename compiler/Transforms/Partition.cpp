// weft-partition: chooses and records how the model runs on a topology.
#include "compiler/Transforms/Passes.h"

#include "compiler/Import/Importer.h"
#include "compiler/Partition/Annotate.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_PARTITIONPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

struct PartitionPass : impl::PartitionPassBase<PartitionPass> {
  using PartitionPassBase::PartitionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const llvm::Twine &msg) {
      module.emitError() << "weft-partition: " << msg;
      signalPassFailure();
    };
    llvm::Expected<ModelConfig> config = modelConfigFromModule(module);
    if (!config)
      return fail(llvm::toString(config.takeError()));
    llvm::Expected<hardware::Topology> topo = hardware::parseTopologySpec(topology);
    if (!topo)
      return fail(llvm::toString(topo.takeError()));
    if (!memoryCap.empty())
      if (llvm::Error e = hardware::applyMemoryCaps(*topo, memoryCap))
        return fail(llvm::toString(std::move(e)));
    llvm::Expected<partition::PartitionOptions> options =
        partition::makePartitionOptions(*config, objective, batch, context, weightDType);
    if (!options)
      return fail(llvm::toString(options.takeError()));
    if (!stages.empty()) {
      llvm::Expected<std::vector<partition::Stage>> forced =
          partition::parseStageSpec(stages, *config, *topo);
      if (!forced)
        return fail(llvm::toString(forced.takeError()));
      options->forcedStages = std::move(*forced);
    }
    llvm::Expected<partition::PartitionedModule> done =
        partition::partitionModule(module, *config, *topo, *options);
    if (!done)
      return fail(llvm::toString(done.takeError()));
  }
};

} // namespace
} // namespace weft

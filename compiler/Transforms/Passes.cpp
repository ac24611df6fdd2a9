// Registration of weft's graph passes and the default pipeline.
#include "compiler/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace weft {

void buildFusionPipeline(OpPassManager &pm, bool fuseProjectionRope) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createFuseSiblingLinearsPass());
  fn.addPass(createFuseRmsNormLinearPass());
  fn.addPass(createFuseSwigluPass());
  fn.addPass(createFuseResidualAddPass());
  fn.addPass(createFuseRopeKvWritePass());
  if (fuseProjectionRope)
    fn.addPass(createFuseProjectionRopePass());
  fn.addPass(createFuseLmHeadPass());
  fn.addPass(createFormKernelRegionsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addSpecializePass(OpPassManager &pm, const CompileOptions &options) {
  SpecializePassOptions specialize;
  specialize.maxBatch = options.maxBatch;
  specialize.decodeBuckets = options.decodeBuckets;
  specialize.prefillChunks = options.prefillChunks;
  pm.addPass(createSpecializePass(specialize));
}

void buildDefaultPipeline(OpPassManager &pm, const CompileOptions &options) {
  buildFusionPipeline(pm);
  addSpecializePass(pm, options);
}

namespace {

struct DefaultPipelineOptions : PassPipelineOptions<DefaultPipelineOptions> {
  Option<int64_t> maxBatch{*this, "max-batch",
                           llvm::cl::desc("Largest decode batch"),
                           llvm::cl::init(64)};
  ListOption<int64_t> decodeBuckets{
      *this, "decode-buckets",
      llvm::cl::desc("Explicit decode bucket sizes (overrides max-batch)")};
  ListOption<int64_t> prefillChunks{
      *this, "prefill-chunks", llvm::cl::desc("Prefill chunk sizes (default: the largest decode bucket + 64 rounded up to 64 when under 512, and 512)")};
};

} // namespace

void registerAllWeftPasses() {
  // The core passes the pipeline uses, so that tools and tests can name them.
  registerCanonicalizerPass();
  registerCSEPass();
  registerWeftPasses();
  PassPipelineRegistration<DefaultPipelineOptions>(
      "weft-default-pipeline",
      "Fuse the imported graph into kernel regions and specialize it per "
      "token bucket (what weft-compile runs)",
      [](OpPassManager &pm, const DefaultPipelineOptions &o) {
        CompileOptions options;
        options.maxBatch = o.maxBatch;
        options.decodeBuckets.assign(o.decodeBuckets.begin(), o.decodeBuckets.end());
        options.prefillChunks.assign(o.prefillChunks.begin(), o.prefillChunks.end());
        buildDefaultPipeline(pm, options);
      });
}

} // namespace weft

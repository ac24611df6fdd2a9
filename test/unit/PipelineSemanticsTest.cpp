// Proves that every graph rewrite keeps the numbers: for each Hugging Face
// fixture, the interpreter's logits after each pass alone and after the
// whole default pipeline agree with those before (and with transformers)
// within 1e-4 relative error, and greedy generation through the specialized
// prefill and decode functions reproduces transformers' continuation.
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/Importer.h"
#include "compiler/Partition/Annotate.h"
#include "compiler/Reference/FixtureRunner.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using reference::FixtureReference;
using reference::WeightStore;

constexpr double kTolerance = 1e-4;

const char *kFixtures[] = {"llama", "llama_tied_bf16", "mistral", "qwen2",
                           "llama_sharded"};

std::string fixtureDir(const std::string &name) {
  return std::string(WEFT_FIXTURES_DIR) + "/" + name;
}

struct PassCase {
  const char *pipeline;   // textual pass pipeline on the module
  const char *mustAppear; // text the pass must introduce (it really ran)
};

// Each graph pass alone on the imported module (after sibling merging where
// the pattern needs it: a norm feeds Q, K and V until they are merged);
// @forward keeps its name.
const PassCase kPassCases[] = {
    {"canonicalize", nullptr},
    {"cse", nullptr},
    {"func.func(weft-fuse-sibling-linears)", "weft.weight_concat"},
    {"func.func(weft-fuse-sibling-linears,weft-fuse-rms-norm-linear)",
     "\"rms_norm_linear\""},
    {"func.func(weft-fuse-sibling-linears,weft-fuse-swiglu)", "\"linear_swiglu\""},
    {"func.func(weft-fuse-residual-add)", "\"linear_residual\""},
    {"func.func(weft-fuse-rope-kv-write)", "\"rope_kv_write\""},
    {"func.func(weft-fuse-lm-head)", "\"rms_norm_logits_argmax\""},
    {"func.func(weft-form-kernel-regions)", "\"attention\""},
};

class PipelineSemanticsTest : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    registerAllWeftPasses();
    context.loadDialect<WeftDialect, mlir::func::FuncDialect>();
    llvm::Expected<ModelSource> src = loadModelSource(fixtureDir(GetParam()));
    ASSERT_TRUE(bool(src)) << llvm::toString(src.takeError());
    source = std::move(*src);
    llvm::Expected<WeightStore> w = WeightStore::fromCheckpoint(*source.checkpoint);
    ASSERT_TRUE(bool(w)) << llvm::toString(w.takeError());
    weights = std::make_unique<WeightStore>(std::move(*w));
    llvm::Expected<FixtureReference> ref =
        reference::readFixtureReference(fixtureDir(GetParam()));
    ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
    expected = std::move(*ref);
  }

  mlir::OwningOpRef<mlir::ModuleOp> import() {
    return importModel(context, source.config);
  }

  std::vector<float> logits(mlir::ModuleOp module, llvm::StringRef fn) {
    llvm::Expected<std::vector<float>> l = reference::runPromptLogits(
        module, *weights, expected.promptIds, fn);
    if (!l) {
      ADD_FAILURE() << llvm::toString(l.takeError());
      return {};
    }
    return *l;
  }

  static std::string print(mlir::ModuleOp module) {
    std::string s;
    llvm::raw_string_ostream os(s);
    module.print(os);
    return os.str();
  }

  mlir::MLIRContext context;
  ModelSource source;
  std::unique_ptr<WeightStore> weights;
  FixtureReference expected;
};

TEST_P(PipelineSemanticsTest, ImportedGraphMatchesTransformers) {
  mlir::OwningOpRef<mlir::ModuleOp> module = import();
  std::vector<float> before = logits(*module, "forward");
  EXPECT_LE(reference::maxRelativeError(before, expected.logits), kTolerance);
}

TEST_P(PipelineSemanticsTest, EachPassAloneKeepsLogits) {
  mlir::OwningOpRef<mlir::ModuleOp> module = import();
  std::vector<float> before = logits(*module, "forward");
  for (const PassCase &pc : kPassCases) {
    mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
    mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
    std::string error;
    llvm::raw_string_ostream errorOs(error);
    ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pc.pipeline, pm, errorOs)))
        << error;
    ASSERT_TRUE(mlir::succeeded(pm.run(*copy))) << pc.pipeline;
    if (pc.mustAppear)
      EXPECT_NE(print(*copy).find(pc.mustAppear), std::string::npos)
          << pc.pipeline << " did not fire";
    std::vector<float> after = logits(*copy, "forward");
    EXPECT_LE(reference::maxRelativeError(after, before), kTolerance)
        << GetParam() << " after " << pc.pipeline;
  }
}

TEST_P(PipelineSemanticsTest, SpecializeAloneKeepsLogits) {
  mlir::OwningOpRef<mlir::ModuleOp> module = import();
  std::vector<float> before = logits(*module, "forward");
  mlir::PassManager pm(&context);
  SpecializePassOptions options;
  std::vector<int64_t> decode = {1}, prefill = {int64_t(expected.promptIds.size())};
  options.decodeBuckets = decode;
  options.prefillChunks = prefill;
  pm.addPass(createSpecializePass(options));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  std::string name = "prefill_c" + std::to_string(expected.promptIds.size());
  std::vector<float> after = logits(*module, name);
  EXPECT_LE(reference::maxRelativeError(after, before), kTolerance);
}

TEST_P(PipelineSemanticsTest, DefaultPipelineKeepsLogitsAndGreedyTokens) {
  mlir::OwningOpRef<mlir::ModuleOp> module = import();
  std::vector<float> before = logits(*module, "forward");
  mlir::PassManager pm(&context);
  CompileOptions options;
  options.maxBatch = 2;
  options.prefillChunks = {int64_t(expected.promptIds.size())};
  buildDefaultPipeline(pm, options);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  // Everything computes inside kernel regions.
  module->walk([&](mlir::Operation *op) {
    if (llvm::isa<WeftDialect>(op->getDialect()) &&
        !llvm::isa<FusionOp, WeightOp, WeightConcatOp>(op))
      EXPECT_TRUE(op->getParentOfType<FusionOp>())
          << op->getName().getStringRef().str() << " outside a region";
  });
  std::string prefill = "prefill_c" + std::to_string(expected.promptIds.size());
  std::vector<float> after = logits(*module, prefill);
  EXPECT_LE(reference::maxRelativeError(after, before), kTolerance);
  EXPECT_LE(reference::maxRelativeError(after, expected.logits), kTolerance);

  llvm::Expected<std::vector<int32_t>> tokens = reference::runGreedy(
      *module, *weights, expected.promptIds,
      int(expected.greedyContinuation.size()), prefill, "decode_b1");
  ASSERT_TRUE(bool(tokens)) << llvm::toString(tokens.takeError());
  EXPECT_EQ(*tokens, expected.greedyContinuation);
}

// A partitioned graph (pipeline over two devices: transfers; or tensor
// parallel: shards and all-reduces) computes the same logits and tokens.
TEST_P(PipelineSemanticsTest, PartitionAnnotationsKeepLogitsAndGreedyTokens) {
  for (bool tensorParallel : {false, true}) {
    mlir::OwningOpRef<mlir::ModuleOp> module = import();
    std::vector<float> before = logits(*module, "forward");
    mlir::PassManager fusion(&context);
    buildFusionPipeline(fusion);
    ASSERT_TRUE(mlir::succeeded(fusion.run(*module)));

    llvm::Expected<target::Topology> topology =
        target::parseTopologySpec("2xh200:nvlink");
    ASSERT_TRUE(bool(topology)) << llvm::toString(topology.takeError());
    llvm::Expected<partition::ModelProfile> profile =
        partition::profileModel(*module, source.config);
    ASSERT_TRUE(bool(profile)) << llvm::toString(profile.takeError());
    partition::PartitionOptions options;
    std::vector<partition::Stage> stages;
    if (tensorParallel) {
      stages.resize(1);
      stages[0].devices = {0, 1};
      stages[0].endLayer = source.config.numLayers;
    } else {
      stages.resize(2);
      stages[0].devices = {0};
      stages[0].endLayer = 1;
      stages[1].devices = {1};
      stages[1].firstLayer = 1;
      stages[1].endLayer = source.config.numLayers;
    }
    stages.front().embedding = true;
    stages.back().head = true;
    partition::PartitionResult result;
    result.best = partition::evaluateCandidate(*profile, *topology, options, stages);
    ASSERT_TRUE(mlir::succeeded(
        partition::annotatePartition(*module, result, *topology, options)));
    std::string text = print(*module);
    EXPECT_NE(text.find(tensorParallel ? "dist.all_reduce" : "dist.transfer"),
              std::string::npos);

    mlir::PassManager pm(&context);
    CompileOptions compile;
    compile.maxBatch = 1;
    compile.prefillChunks = {int64_t(expected.promptIds.size())};
    addSpecializePass(pm, compile);
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    std::string prefill = "prefill_c" + std::to_string(expected.promptIds.size());
    std::vector<float> after = logits(*module, prefill);
    EXPECT_LE(reference::maxRelativeError(after, before), kTolerance)
        << (tensorParallel ? "tensor parallel" : "pipeline");
    llvm::Expected<std::vector<int32_t>> tokens = reference::runGreedy(
        *module, *weights, expected.promptIds,
        int(expected.greedyContinuation.size()), prefill, "decode_b1");
    ASSERT_TRUE(bool(tokens)) << llvm::toString(tokens.takeError());
    EXPECT_EQ(*tokens, expected.greedyContinuation);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineSemanticsTest,
                         ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           return std::string(info.param);
                         });

} // namespace
} // namespace weft

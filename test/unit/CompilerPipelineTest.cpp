// compiler/Pipeline: the stages in order, what each leaves in the
// Compilation, the Backend contract, and the plan back end end to end
// (lowering passes, kernel compilation through NVRTC, serialization) on the
// llama fixture, read back by the runtime's plan reader.
#include "compiler/Pipeline/Pipeline.h"
#include "dialects/Plan/IR/PlanDialect.h"
#include "runtime/plan/PlanReader.h"
#include "targets/Plan/PlanBackend.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using weft::pipeline::Compilation;
using weft::pipeline::Options;
using weft::pipeline::Stage;

Options fixture(Stage stop) {
  Options o;
  o.model = std::string(WEFT_FIXTURES_DIR) + "/llama";
  o.stopAfter = stop;
  o.topology = stop >= Stage::Partition ? "h200" : "";
  o.maxBatch = 2;
  o.prefillChunks = {8};
  o.context = 64;
  return o;
}

size_t count(mlir::ModuleOp m, llvm::StringRef name) {
  size_t n = 0;
  m.walk([&](mlir::Operation *op) { n += op->getName().getStringRef() == name; });
  return n;
}

std::string errorOf(llvm::Expected<std::unique_ptr<Compilation>> c) {
  if (c)
    return "";
  return llvm::toString(c.takeError());
}

TEST(CompilerPipeline, ImportStopsAtTheGraph) {
  auto c = weft::pipeline::compile(fixture(Stage::Import));
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_NE((*c)->importSummary.find("layers"), std::string::npos) << (*c)->importSummary;
  EXPECT_EQ(count(*(*c)->module, "weft.fusion"), 0u);
  EXPECT_EQ((*c)->contextLength, 64);
  EXPECT_FALSE((*c)->topology);
}

TEST(CompilerPipeline, FuseSpecializesWithoutATopology) {
  auto c = weft::pipeline::compile(fixture(Stage::Fuse));
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  mlir::ModuleOp m = *(*c)->module;
  EXPECT_GT(count(m, "weft.fusion"), 0u);
  std::vector<std::string> buckets;
  for (auto fn : m.getOps<mlir::func::FuncOp>())
    buckets.push_back(fn.getSymName().str());
  EXPECT_EQ(buckets, (std::vector<std::string>{"decode_b1", "decode_b2", "prefill_c8"}));
  EXPECT_FALSE(m->hasAttr("dist.partition"));
}

TEST(CompilerPipeline, PartitionAnnotatesAndKeepsTheDecision) {
  auto c = weft::pipeline::compile(fixture(Stage::Partition));
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_TRUE((*c)->module->getOperation()->hasAttr("dist.partition"));
  ASSERT_TRUE((*c)->partition && (*c)->profile && (*c)->topology);
  EXPECT_EQ((*c)->topology->name, "h200");
  EXPECT_EQ((*c)->partition->best.stages.size(), 1u);
  weft::partition::StepSplit raw;
  EXPECT_GT((*c)->predictStep(false, 1, 64, &raw).total(), 0.0);
  EXPECT_TRUE((*c)->quantized.empty());
}

// A graph printed over a topology (--emit=fused) holds a plan's weights:
// --weight-dtype int4 quantizes its projections as a plan's would; a
// report alone only prices them.
TEST(CompilerPipeline, AGraphAsPlanHoldsThePlansWeights) {
  Options o = fixture(Stage::Partition);
  o.model = std::string(WEFT_FIXTURES_DIR) + "/llama_tied_bf16"; // 16-bit
  o.weightDType = "int4";
  auto report = weft::pipeline::compile(o);
  ASSERT_TRUE(bool(report)) << llvm::toString(report.takeError());
  EXPECT_TRUE((*report)->quantized.empty());
  o.graphAsPlan = true;
  auto graph = weft::pipeline::compile(o);
  ASSERT_TRUE(bool(graph)) << llvm::toString(graph.takeError());
  ASSERT_FALSE((*graph)->quantized.empty());
  EXPECT_EQ((*graph)->quantized.front().bits, 4);
}

TEST(CompilerPipeline, BadOptionsAreOneLineErrors) {
  Options o = fixture(Stage::Partition);
  o.topology = "";
  EXPECT_EQ(errorOf(weft::pipeline::compile(o)), "partitioning needs a topology (--topology)");
  o = fixture(Stage::Fuse);
  o.stages = "0+1";
  EXPECT_EQ(errorOf(weft::pipeline::compile(o)), "--stages needs --topology");
  o = fixture(Stage::Fuse);
  o.weightDType = "int4";
  EXPECT_NE(errorOf(weft::pipeline::compile(o)).find("--weight-dtype needs --topology"),
            std::string::npos);
  o = fixture(Stage::Fuse);
  o.maxBatch = 0;
  EXPECT_EQ(errorOf(weft::pipeline::compile(o)), "--max-batch must be at least 1");
  o = fixture(Stage::Partition);
  o.batch = 4;
  EXPECT_NE(errorOf(weft::pipeline::compile(o)).find("--max-batch 2 is below --batch 4"),
            std::string::npos);
  o = fixture(Stage::Lower);
  EXPECT_EQ(errorOf(weft::pipeline::compile(o)), "internal error: lowering needs a back end");
  o = fixture(Stage::Import);
  o.model = "builtin:no-such-model";
  EXPECT_NE(errorOf(weft::pipeline::compile(o)).find("no-such-model"), std::string::npos);
  // A plan holds the checkpoint's own weights or projections quantized
  // here; other dtypes are predictions only.
  o = fixture(Stage::Serialize);
  o.weightDType = "bf16";
  weft::plan::PlanBackend backend({});
  EXPECT_NE(errorOf(weft::pipeline::compile(o, &backend)).find("a plan holds the checkpoint's own"),
            std::string::npos);
}

// Records what the pipeline asks of a back end, in order.
struct RecordingBackend : weft::pipeline::Backend {
  std::vector<std::string> calls;
  bool refuse = false;
  llvm::Error check(const Compilation &c) override {
    calls.push_back("check");
    if (refuse)
      return llvm::createStringError(llvm::inconvertibleErrorCode(), "refused by the target");
    EXPECT_TRUE(c.partition.has_value());
    return llvm::Error::success();
  }
  void buildLoweringPipeline(mlir::OpPassManager &, const Compilation &) override {
    calls.push_back("lower");
  }
  llvm::Error serialize(Compilation &) override {
    calls.push_back("serialize");
    return llvm::Error::success();
  }
};

TEST(CompilerPipeline, BackendsAreCheckedThenLoweredThenSerialized) {
  RecordingBackend lowerOnly;
  ASSERT_TRUE(bool(weft::pipeline::compile(fixture(Stage::Lower), &lowerOnly)));
  EXPECT_EQ(lowerOnly.calls, (std::vector<std::string>{"check", "lower"}));
  RecordingBackend all;
  ASSERT_TRUE(bool(weft::pipeline::compile(fixture(Stage::Serialize), &all)));
  EXPECT_EQ(all.calls, (std::vector<std::string>{"check", "lower", "serialize"}));
  RecordingBackend refusing;
  refusing.refuse = true;
  EXPECT_EQ(errorOf(weft::pipeline::compile(fixture(Stage::Serialize), &refusing)),
            "refused by the target");
  EXPECT_EQ(refusing.calls, (std::vector<std::string>{"check"}));
}

TEST(CompilerPipeline, ThePlanBackendLowersAndWritesAPlanTheRuntimeReads) {
  weft::plan::PlanBuildOptions options;
  options.lowering.archOverride = "sm_90";
  weft::plan::PlanBackend backend(std::move(options));
  auto c = weft::pipeline::compile(fixture(Stage::Serialize), &backend);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  // The module is now the plan: tables, then the buckets with placed buffers.
  mlir::ModuleOp m = *(*c)->module;
  EXPECT_EQ(count(m, "func.func"), 0u);
  EXPECT_EQ(count(m, "plan.kv_cache"), 1u);
  EXPECT_EQ(count(m, "plan.bucket"), 3u);
  EXPECT_GT(count(m, "plan.kernel"), 0u);
  m.walk([](weft::plan_ir::BufferOp b) { EXPECT_TRUE(b.getOffset().has_value()); });
  const weft::plan::PlanStats &stats = backend.stats();
  EXPECT_EQ(stats.kernels, count(m, "plan.kernel"));
  EXPECT_EQ(stats.binaries, stats.kernels); // one architecture
  ASSERT_EQ(stats.peakArenaBytes.size(), 1u);
  EXPECT_GT(stats.peakArenaBytes[0], 0u);

  // The runtime's reader accepts it: structure, seal and every index.
  weft::StatusOr<weft::plan::PlanFile> file =
      weft::plan::PlanFile::fromBytes(backend.plan(), "pipeline.weft");
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const weft::plan::fb::Plan &plan = file->plan();
  EXPECT_EQ(plan.buckets()->size(), 3u);
  EXPECT_EQ(plan.kernels()->size(), stats.kernels);
  EXPECT_EQ(plan.kv_cache()->max_sequences(), 2);
  EXPECT_EQ(plan.topology()->devices()->Get(0)->arch()->str(), "sm_90");
}

} // namespace

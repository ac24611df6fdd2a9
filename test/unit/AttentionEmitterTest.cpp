// Attention kernels: every built-in model's attention regions (decode buckets
// 1, 2, 4 and a 128-token prefill chunk) emit with sane launches and compile
// with NVRTC for sm_86 and sm_90; split planning; sliding windows; errors.
#include "compiler/Import/Importer.h"
#include "compiler/Import/ModelConfig.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "targets/CUDA/AttentionEmitter.h"
#include "targets/CUDA/Nvrtc.h"
#include "test/unit/TestFiles.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace weft::cuda {
namespace {

// What the attention op of a region says.
struct AttentionInfo {
  int64_t tokens = 0, heads = 0, kvHeads = 0, headDim = 0, layer = 0, window = 0;
  int64_t elementBytes = 2;
};

AttentionInfo infoOf(FusionOp region) {
  AttentionInfo info;
  region.walk([&](AttentionOp op) {
    auto q = llvm::cast<mlir::RankedTensorType>(op.getQuery().getType());
    info.tokens = q.getDimSize(0);
    info.heads = op.getNumHeads();
    info.kvHeads = op.getNumKvHeads();
    info.headDim = op.getHeadDim();
    info.layer = op.getLayer();
    info.window = op.getSlidingWindow() ? int64_t(*op.getSlidingWindow()) : 0;
    info.elementBytes = q.getElementType().isF32() ? 4 : 2;
  });
  return info;
}

EmitOptions testOptions() {
  EmitOptions o;
  o.blockTokens = 16;
  o.maxSequences = 4;
  o.maxBlocksPerSequence = 256;
  o.smCount = 132;
  o.computeCapability = 90;
  return o;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

void expectBinding(const ParamBinding &p, ParamBinding::Kind kind, int64_t index,
                   const char *name, const std::string &kernel) {
  EXPECT_EQ(p.kind, kind) << kernel << " " << name;
  EXPECT_EQ(p.index, index) << kernel << " " << name;
  EXPECT_EQ(p.name, name) << kernel;
}

class AttentionEmitterTest : public ::testing::Test {
protected:
  void SetUp() override {
    registerAllWeftPasses();
    context.loadDialect<WeftDialect, dist::DistDialect, mlir::func::FuncDialect>();
  }

  // The default pipeline with decode buckets 1, 2, 4 and prefill chunks of 128.
  mlir::OwningOpRef<mlir::ModuleOp> compile(const ModelConfig &config) {
    mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, config);
    mlir::PassManager pm(&context);
    CompileOptions co;
    co.maxBatch = 4;
    co.decodeBuckets = {1, 2, 4};
    co.prefillChunks = {128};
    buildDefaultPipeline(pm, co);
    EXPECT_TRUE(mlir::succeeded(pm.run(*module))) << config.name;
    return module;
  }

  static std::vector<FusionOp> attentionRegions(mlir::ModuleOp module) {
    std::vector<FusionOp> regions;
    module.walk([&](FusionOp r) {
      if (r.getKind() == "attention")
        regions.push_back(r);
    });
    return regions;
  }

  // Checks the steps of one region against the contract and the split plan;
  // adds its kernels to `unique` (by source).
  static void checkSteps(FusionOp region, const std::vector<EmittedStep> &steps,
                         const EmitOptions &o, std::map<std::string, EmittedKernel> &unique,
                         const std::string &what) {
    using Kind = ParamBinding::Kind;
    AttentionInfo a = infoOf(region);
    ASSERT_FALSE(steps.empty()) << what;
    for (const EmittedStep &step : steps) {
      ASSERT_TRUE(step.kernel && !step.gemm) << what;
      const EmittedKernel &k = *step.kernel;
      EXPECT_EQ(k.regionKind, "attention");
      // A library template instance: the source is its Config alone.
      EXPECT_FALSE(contains(k.source, "__global__")) << k.name;
      EXPECT_TRUE(contains(k.instance, "weft::kernels::attention::")) << k.name;
      EXPECT_TRUE(contains(k.source, std::string("static constexpr bool RELEASE_EARLY = ") +
                                         (k.releaseEarly ? "true;" : "false;")))
          << k.name;
      int threads = k.block[0] * k.block[1] * k.block[2];
      EXPECT_GE(threads, 32) << k.name;
      EXPECT_LE(threads, 1024) << k.name;
      EXPECT_EQ(threads % 32, 0) << k.name;
      for (int d : k.grid)
        EXPECT_GE(d, 1) << k.name;
      EXPECT_LE(k.grid[1], 65535) << k.name;
      EXPECT_LE(k.grid[2], 65535) << k.name;
      // All shared memory is dynamic, and within the default 48 KiB.
      EXPECT_GT(k.sharedBytes, 0) << k.name;
      EXPECT_LE(k.sharedBytes, 48 * 1024) << k.name;
      EXPECT_FALSE(contains(k.source, "\n  __shared__")) << k.name << ": static shared memory";
      // Every model dimension is a compile-time constant.
      EXPECT_TRUE(contains(k.source, "constexpr int kTokens = " + std::to_string(a.tokens) + ";"))
          << k.name;
      EXPECT_TRUE(contains(k.source, "constexpr int kHeads = " + std::to_string(a.heads) + ";"))
          << k.name;
      EXPECT_TRUE(
          contains(k.source, "constexpr int kKvHeads = " + std::to_string(a.kvHeads) + ";"))
          << k.name;
      EXPECT_TRUE(
          contains(k.source, "constexpr int kHeadDim = " + std::to_string(a.headDim) + ";"))
          << k.name;
      EXPECT_TRUE(contains(k.source, "constexpr int kWindow = " + std::to_string(a.window) + ";"))
          << k.name;
      EXPECT_TRUE(contains(k.source, "constexpr float kScaleLog2 = ")) << k.name;
      EXPECT_TRUE(contains(k.source,
                           "constexpr int kBlockTokens = " + std::to_string(o.blockTokens) + ";"))
          << k.name;
      auto [it, inserted] = unique.try_emplace(k.source, k);
      if (!inserted)
        EXPECT_EQ(it->second.name, k.name) << "one source, one name";
    }

    const EmittedKernel &first = *steps[0].kernel;
    int64_t maxContext = o.blockTokens * o.maxBlocksPerSequence;
    int64_t maxSpan = a.window ? std::min(a.window, maxContext) : maxContext;
    bool prefill = a.tokens > kMaxGemvTokens && a.elementBytes == 2 && a.headDim % 16 == 0 &&
                   a.headDim <= 128;
    // Flash-decoding (split, then combine when split) always comes first;
    // above the GEMV sizes the chunk kernel follows for prefill chunks.
    EXPECT_TRUE(contains(first.name, "decode")) << first.name;
    AttentionSplitPlan p = planAttentionSplits(a.tokens, a.heads, a.kvHeads, a.headDim,
                                               a.elementBytes, maxSpan, o.smCount);
    EXPECT_EQ(first.grid, (std::array<int, 3>{int(a.tokens), int(a.kvHeads * p.headBlocks),
                                              int(p.splits)}))
        << first.name;
    EXPECT_EQ(first.block[0], p.tensorCores ? 64 : 128) << first.name;
    // The engine is the template the kernel instantiates (weft/attention_decode.cuh).
    EXPECT_TRUE(contains(first.source, "#include \"weft/attention_decode.cuh\"")) << first.name;
    EXPECT_EQ(first.instance, p.tensorCores
                                  ? "weft::kernels::attention::decodeSplitKernel<Config, true>"
                                  : "weft::kernels::attention::decodeSplitKernel<Config, false>")
        << first.name;
    EXPECT_TRUE(contains(first.source, "constexpr int kSplits = " + std::to_string(p.splits) +
                                           ";"))
        << first.name;
    EXPECT_TRUE(contains(first.source, std::string("constexpr bool kChunkKernel = ") +
                                           (prefill ? "true;" : "false;")))
        << first.name;
    EXPECT_GE(p.headBlocks * p.headsPerBlock, a.heads / a.kvHeads);
    ASSERT_EQ(first.params.size(), 7u);
    size_t decodeSteps = p.splits == 1 ? 1 : 2;
    ASSERT_EQ(steps.size(), decodeSteps + (prefill ? 1 : 0)) << what;
    if (p.splits == 1) {
      expectBinding(first.params[6], Kind::RegionResult, 0, "out", first.name);
    } else {
      uint64_t bytes = uint64_t(a.tokens * a.heads * p.splits * (a.headDim + 2) * 4);
      expectBinding(first.params[6], Kind::Scratch, 0, "partials", first.name);
      EXPECT_EQ(first.params[6].bytes, bytes) << first.name;
      const EmittedKernel &combine = *steps[1].kernel;
      EXPECT_TRUE(contains(combine.name, "combine")) << combine.name;
      EXPECT_EQ(combine.instance, "weft::kernels::attention::decodeCombineKernel<Config>")
          << combine.name;
      EXPECT_EQ(combine.grid, (std::array<int, 3>{int(a.tokens), int(a.heads), 1}));
      ASSERT_EQ(combine.params.size(), 4u);
      expectBinding(combine.params[0], Kind::RegionInput, 1, "positions", combine.name);
      expectBinding(combine.params[1], Kind::RegionInput, 2, "slots", combine.name);
      expectBinding(combine.params[2], Kind::Scratch, 0, "partials", combine.name);
      EXPECT_EQ(combine.params[2].bytes, bytes) << combine.name;
      expectBinding(combine.params[3], Kind::RegionResult, 0, "out", combine.name);
    }
    if (prefill) {
      const EmittedKernel &chunk = *steps.back().kernel;
      EXPECT_TRUE(contains(chunk.name, "prefill")) << chunk.name;
      EXPECT_TRUE(contains(chunk.source, "#include \"weft/attention_prefill.cuh\""))
          << chunk.name;
      EXPECT_EQ(chunk.instance, "weft::kernels::attention::prefillChunkKernel<Config>")
          << chunk.name;
      EXPECT_EQ(chunk.grid, (std::array<int, 3>{int((a.tokens + 63) / 64), int(a.heads), 1}));
      EXPECT_EQ(chunk.block, (std::array<int, 3>{128, 1, 1}));
      ASSERT_EQ(chunk.params.size(), 7u);
      for (size_t i = 0; i < 6; ++i)
        EXPECT_EQ(chunk.params[i].kind, first.params[i].kind) << chunk.name;
      expectBinding(chunk.params[6], Kind::RegionResult, 0, "out", chunk.name);
    }
    // The split or prefill kernel reads the region's inputs, the layer's
    // caches and the block tables, in this order.
    expectBinding(first.params[0], Kind::RegionInput, 0, "query", first.name);
    expectBinding(first.params[1], Kind::RegionInput, 1, "positions", first.name);
    expectBinding(first.params[2], Kind::RegionInput, 2, "slots", first.name);
    expectBinding(first.params[3], Kind::KCache, a.layer, "k_cache", first.name);
    expectBinding(first.params[4], Kind::VCache, a.layer, "v_cache", first.name);
    expectBinding(first.params[5], Kind::BlockTables, 0, "block_tables", first.name);
  }

  mlir::MLIRContext context;
};

// Compiles `kernels` for sm_86 and sm_90 through a fresh cache.
void compileForBothArchitectures(const std::map<std::string, EmittedKernel> &kernels) {
  std::vector<EmittedKernel> list;
  std::set<std::string> names;
  for (const auto &[source, k] : kernels) {
    list.push_back(k);
    EXPECT_TRUE(names.insert(k.name).second) << "two sources named " << k.name;
  }
  weft::testing::TempDir dir;
  KernelCache cache(dir.path());
  for (const char *arch : {"sm_86", "sm_90"}) {
    llvm::Expected<std::vector<CompiledKernel>> compiled = compileKernels(list, arch, &cache);
    ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
    ASSERT_EQ(compiled->size(), list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const CompiledKernel &c = (*compiled)[i];
      EXPECT_EQ(c.name, list[i].name);
      EXPECT_FALSE(c.cubin.empty()) << c.name << " " << arch;
      EXPECT_TRUE(contains(c.ptx, ".entry " + c.symbol)) << c.name << " " << arch;
    }
  }
}

TEST_F(AttentionEmitterTest, EveryBuiltinModelEmitsAndCompiles) {
  EmitOptions options = testOptions();
  std::map<std::string, EmittedKernel> unique;
  for (const std::string &model : builtinModelNames()) {
    llvm::Expected<ModelConfig> config = getBuiltinModel(model);
    ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
    mlir::OwningOpRef<mlir::ModuleOp> module = compile(*config);
    ASSERT_TRUE(module);
    std::set<int64_t> tokens;
    std::vector<FusionOp> regions = attentionRegions(*module);
    EXPECT_EQ(int64_t(regions.size()), 4 * config->numLayers) << model;
    for (FusionOp region : regions) {
      AttentionInfo a = infoOf(region);
      tokens.insert(a.tokens);
      llvm::Expected<std::vector<EmittedStep>> steps = emitAttentionRegion(region, options);
      ASSERT_TRUE(bool(steps)) << model << ": " << llvm::toString(steps.takeError());
      checkSteps(region, *steps, options, unique, model + " layer " + std::to_string(a.layer));
      // The same region through the dispatch gives the same kernels.
      if (a.layer == 0) {
        llvm::Expected<std::vector<EmittedStep>> again = emitRegion(region, options);
        ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
        ASSERT_EQ(again->size(), steps->size());
        for (size_t i = 0; i < steps->size(); ++i) {
          EXPECT_EQ((*again)[i].kernel->source, (*steps)[i].kernel->source);
          EXPECT_EQ((*again)[i].kernel->instance, (*steps)[i].kernel->instance);
        }
      }
    }
    EXPECT_EQ(tokens, (std::set<int64_t>{1, 2, 4, 128})) << model;
  }
  // Layers share their sources: a handful of kernels per model (buckets 1,
  // 2, 4: split and combine; 128: split, combine and the chunk kernel).
  EXPECT_LE(unique.size(), 9 * builtinModelNames().size());
  compileForBothArchitectures(unique);
}

TEST_F(AttentionEmitterTest, SlidingWindowIsCompiledIn) {
  llvm::Expected<ModelConfig> config = getBuiltinModel("mistral-7b");
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  config->slidingWindow = 1000;
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(*config);
  ASSERT_TRUE(module);
  EmitOptions options = testOptions();
  std::map<std::string, EmittedKernel> unique;
  std::vector<FusionOp> regions = attentionRegions(*module);
  ASSERT_FALSE(regions.empty());
  for (FusionOp region : regions) {
    auto window = region.getDimsAttr().getAs<mlir::IntegerAttr>("sliding_window");
    ASSERT_TRUE(window) << "dims.sliding_window";
    EXPECT_EQ(window.getInt(), 1000);
    llvm::Expected<std::vector<EmittedStep>> steps = emitAttentionRegion(region, options);
    ASSERT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
    checkSteps(region, *steps, options, unique, "mistral-7b, window 1000");
    for (const EmittedStep &step : *steps) {
      EXPECT_TRUE(contains(step.kernel->source, "constexpr int kWindow = 1000;"))
          << step.kernel->name;
      EXPECT_TRUE(contains(step.kernel->name, "_w1000_")) << step.kernel->name;
    }
    // The window, not the 4096-position cache, bounds the splits: at most
    // ceil(1000 / 64) of them.
    if (infoOf(region).tokens <= kMaxGemvTokens)
      EXPECT_EQ((*steps)[0].kernel->grid[2], 16) << (*steps)[0].kernel->name;
  }
  compileForBothArchitectures(unique);

  // Without the window the kernels say so.
  config->slidingWindow.reset();
  module = compile(*config);
  ASSERT_TRUE(module);
  for (FusionOp region : attentionRegions(*module)) {
    llvm::Expected<std::vector<EmittedStep>> steps = emitAttentionRegion(region, options);
    ASSERT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
    EXPECT_TRUE(contains((*steps)[0].kernel->source, "constexpr int kWindow = 0;"));
    EXPECT_FALSE(contains((*steps)[0].kernel->name, "_w1000"));
  }
}

TEST_F(AttentionEmitterTest, F32PrefillRunsTheDecodeKernels) {
  // The tensor-core prefill takes f16/bf16; the f32 test fixtures go
  // through the split kernels with 128 tokens.
  llvm::Expected<ModelConfig> config =
      readModelConfig(std::string(WEFT_FIXTURES_DIR) + "/llama/config.json");
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(*config);
  ASSERT_TRUE(module);
  EmitOptions options = testOptions();
  std::map<std::string, EmittedKernel> unique;
  bool sawPrefill = false;
  for (FusionOp region : attentionRegions(*module)) {
    llvm::Expected<std::vector<EmittedStep>> steps = emitAttentionRegion(region, options);
    ASSERT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
    checkSteps(region, *steps, options, unique, "llama fixture (f32)");
    if (infoOf(region).tokens == 128) {
      sawPrefill = true;
      EXPECT_TRUE(contains((*steps)[0].kernel->name, "decode_t128_")) << (*steps)[0].kernel->name;
      EXPECT_TRUE(contains((*steps)[0].kernel->source, "using elem_t = float;"));
    }
  }
  EXPECT_TRUE(sawPrefill);
  compileForBothArchitectures(unique);
}

TEST_F(AttentionEmitterTest, EmissionIsDeterministicAndFollowsOptions) {
  llvm::Expected<ModelConfig> config = getBuiltinModel("qwen2.5-1.5b");
  ASSERT_TRUE(bool(config));
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(*config);
  ASSERT_TRUE(module);
  FusionOp region = attentionRegions(*module).front();
  ASSERT_EQ(infoOf(region).tokens, 1);
  EmitOptions options = testOptions();
  auto a = emitAttentionRegion(region, options), b = emitAttentionRegion(region, options);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i)
    EXPECT_EQ((*a)[i].kernel->source, (*b)[i].kernel->source);
  // A smaller GPU gets fewer splits; the cache geometry is compiled in.
  options.smCount = 28;
  options.blockTokens = 32;
  options.maxBlocksPerSequence = 100;
  auto c = emitAttentionRegion(region, options);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  const EmittedKernel &k = *(*c)[0].kernel;
  EXPECT_LT(k.grid[2], (*a)[0].kernel->grid[2]);
  EXPECT_TRUE(contains(k.source, "constexpr int kBlockTokens = 32;"));
  EXPECT_TRUE(contains(k.source, "constexpr int kMaxBlocks = 100;"));
  EXPECT_TRUE(contains(k.source, "constexpr int kMaxSequences = 4;"));
}

TEST(AttentionSplitPlanTest, SplitsFillTheGpuForOneToken) {
  // llama-3.1-8b: groups of 4 run the SIMT kernel, 4 blocks per SM.
  AttentionSplitPlan p = planAttentionSplits(1, 32, 8, 128, 2, 32768, 132);
  EXPECT_FALSE(p.tensorCores);
  EXPECT_EQ(p.splits, 66);
  EXPECT_EQ(p.headBlocks, 1);
  EXPECT_EQ(p.headsPerBlock, 4);
  EXPECT_EQ(p.vec, 8); // 16-byte loads of bf16
  EXPECT_EQ(p.lanesPerRow, 16);
  EXPECT_GE(p.stages, 2);
  // The decode bucket does not change the plan: one long sequence of a batch
  // must fill the GPU by itself. A prefill chunk shares it among its tokens.
  EXPECT_EQ(planAttentionSplits(16, 32, 8, 128, 2, 32768, 132).splits, p.splits);
  EXPECT_EQ(planAttentionSplits(128, 32, 8, 128, 4, 32768, 132).splits, 1);
  EXPECT_EQ(planAttentionSplits(33, 32, 8, 128, 4, 32768, 132).splits, 2);
  // Short contexts: no split shorter than a granule.
  EXPECT_EQ(planAttentionSplits(1, 32, 8, 128, 2, 100, 132).splits, 2);
  EXPECT_EQ(planAttentionSplits(1, 32, 8, 128, 2, 64, 132).splits, 1);
  // A smaller GPU.
  EXPECT_EQ(planAttentionSplits(1, 32, 8, 128, 2, 32768, 28).splits, 14);
}

TEST(AttentionSplitPlanTest, BigGroupsUseTensorCores) {
  // llama-3.1-70b: 8 query heads per KV head as mma rows.
  AttentionSplitPlan p = planAttentionSplits(1, 64, 8, 128, 2, 32768, 132);
  EXPECT_TRUE(p.tensorCores);
  EXPECT_EQ(p.headBlocks, 1);
  EXPECT_EQ(p.headsPerBlock, 8);
  EXPECT_EQ(p.warps, 2);
  EXPECT_EQ(p.keysPerTile, 32);
  EXPECT_GE(p.splits, 2);
  // More than 16 heads per KV head: several blocks of at most 16.
  AttentionSplitPlan q = planAttentionSplits(1, 40, 2, 128, 2, 32768, 132);
  EXPECT_TRUE(q.tensorCores);
  EXPECT_EQ(q.headBlocks, 2);
  EXPECT_EQ(q.headsPerBlock, 10);
  // f32 and odd head sizes stay on the SIMT kernel.
  AttentionSplitPlan f = planAttentionSplits(1, 64, 8, 128, 4, 32768, 132);
  EXPECT_FALSE(f.tensorCores);
  EXPECT_EQ(f.vec, 4);
  EXPECT_FALSE(planAttentionSplits(1, 64, 8, 72, 2, 32768, 132).tensorCores);
}

// A specialized attention region as text.
std::string attentionModule(const std::string &tokens, const std::string &dims,
                            const std::string &kind = "attention") {
  std::string q = "tensor<" + tokens + "x64xbf16>", v = "tensor<" + tokens + "xi32>";
  std::string cache = "!weft.kv_cache<layers = 2, kv_heads = 2, head_dim = 16, dtype = bf16>";
  return "func.func @f(%q: " + q + ", %p: " + v + ", %s: " + v + ", %c: " + cache + ") -> " +
         q + " {\n  %r = weft.fusion \"" + kind + "\" (%q, %p, %s, %c) " + dims + " : (" + q +
         ", " + v + ", " + v + ", " + cache + ") -> " + q + " {\n  ^bb0(%a: " + q + ", %b: " +
         v + ", %d: " + v + ", %e: " + cache +
         "):\n    %o = weft.attention %a, %b, %d, %e {head_dim = 16 : i64, layer = 1 : i64, "
         "num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (" +
         q + ", " + v + ", " + v + ", " + cache + ") -> " + q + "\n    weft.yield %o : " + q +
         "\n  }\n  return %r : " + q + "\n}\n";
}

TEST_F(AttentionEmitterTest, ErrorsNameTheProblem) {
  auto firstRegion = [&](const std::string &text) -> mlir::OwningOpRef<mlir::ModuleOp> {
    mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    EXPECT_TRUE(m) << text;
    return m;
  };
  auto errorOf = [&](mlir::ModuleOp m, const EmitOptions &o) {
    FusionOp region;
    m.walk([&](FusionOp r) { region = r; });
    llvm::Expected<std::vector<EmittedStep>> steps = emitAttentionRegion(region, o);
    return steps ? std::string() : llvm::toString(steps.takeError());
  };
  EmitOptions options = testOptions();

  mlir::OwningOpRef<mlir::ModuleOp> ok =
      firstRegion(attentionModule("2", "{dims = {tokens = 2 : i64}}"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(errorOf(*ok, options), "");
  EmitOptions old = options;
  old.computeCapability = 75;
  EXPECT_TRUE(contains(errorOf(*ok, old), "sm_80")) << errorOf(*ok, old);

  mlir::OwningOpRef<mlir::ModuleOp> dynamic = firstRegion(attentionModule("?", ""));
  ASSERT_TRUE(dynamic);
  EXPECT_TRUE(contains(errorOf(*dynamic, options), "not static")) << errorOf(*dynamic, options);

  mlir::OwningOpRef<mlir::ModuleOp> wrongDims =
      firstRegion(attentionModule("2", "{dims = {tokens = 2 : i64, layer = 0 : i64}}"));
  ASSERT_TRUE(wrongDims);
  EXPECT_TRUE(contains(errorOf(*wrongDims, options), "dims.layer"))
      << errorOf(*wrongDims, options);

  mlir::OwningOpRef<mlir::ModuleOp> otherKind =
      firstRegion(attentionModule("2", "{dims = {tokens = 2 : i64}}", "rope_kv_write"));
  ASSERT_TRUE(otherKind);
  EXPECT_TRUE(contains(errorOf(*otherKind, options), "not 'attention'"))
      << errorOf(*otherKind, options);
}

} // namespace
} // namespace weft::cuda

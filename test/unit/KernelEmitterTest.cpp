// CUDA emission and NVRTC: every region of every built-in model emits, and
// every distinct kernel compiles for sm_86 and sm_90; the kernel cache and
// the one-line compile errors.
#include "compiler/Import/Importer.h"
#include "compiler/Import/ModelConfig.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "targets/CUDA/KernelEmitter.h"
#include "targets/CUDA/Nvrtc.h"
#include "test/unit/TestFiles.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <map>
#include <set>

namespace weft::cuda {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

#ifdef WEFT_HAVE_ATTENTION_EMITTER
constexpr bool kHaveAttention = true;
#else
constexpr bool kHaveAttention = false;
#endif

// What emitting one module produced.
struct Emission {
  std::map<std::string, EmittedKernel> kernels; // by source: the unique ones
  std::set<std::string> kinds;                  // region kinds seen
  size_t regions = 0, steps = 0, gemms = 0;
};

class KernelEmitterTest : public ::testing::Test {
protected:
  void SetUp() override {
    registerAllWeftPasses();
    context.loadDialect<WeftDialect, dist::DistDialect, mlir::func::FuncDialect>();
  }

  // Imports a built-in model and runs the default pipeline.
  // quantBits: 4 or 8 quantizes the projections as --weight-dtype int4|int8;
  // dtype: the checkpoint's type instead of the built-in model's.
  mlir::OwningOpRef<mlir::ModuleOp> compile(llvm::StringRef model, bool sampling,
                                            std::vector<int64_t> decodeBuckets = {},
                                            int quantBits = 0,
                                            std::optional<io::DType> dtype = std::nullopt,
                                            QuantFormat format = QuantFormat::Int,
                                            int64_t group = 0) {
    llvm::Expected<ModelConfig> config = getBuiltinModel(model);
    EXPECT_TRUE(bool(config)) << llvm::toString(config.takeError());
    if (!config)
      return nullptr;
    if (dtype)
      config->dtype = *dtype;
    ImportOptions io;
    io.sampling = sampling;
    mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, *config, io);
    if (quantBits)
      quantizeProjections(*module, quantBits, format);
    if (group) // a grouping --weight-dtype does not make (GPTQ's 8-bit group 128)
      module->walk([&](WeightOp w) {
        if (QuantAttr q = w.getQuantAttr())
          w.setQuantAttr(QuantAttr::get(&context, q.getBits(), group, q.getFormat(), false));
      });
    mlir::PassManager pm(&context);
    CompileOptions co;
    co.maxBatch = 4;
    co.decodeBuckets = std::move(decodeBuckets);
    co.prefillChunks = {128};
    buildDefaultPipeline(pm, co);
    EXPECT_TRUE(mlir::succeeded(pm.run(*module))) << model.str();
    return module;
  }

  // Emits every region of every function, checking the invariants of each
  // step, and collects the distinct kernels into `out`.
  void emitAll(mlir::ModuleOp module, llvm::StringRef model, Emission &out,
               const EmitOptions &options = {}) {
    module.walk([&](FusionOp region) {
      if (region.getKind() == "attention" && !kHaveAttention)
        return;
      ++out.regions;
      out.kinds.insert(region.getKind().str());
      llvm::Expected<std::vector<EmittedStep>> steps = emitRegion(region, options);
      if (!steps) {
        ADD_FAILURE() << model.str() << ": " << llvm::toString(steps.takeError());
        return;
      }
      EXPECT_FALSE(steps->empty()) << model.str() << " " << region.getKind().str();
      for (const EmittedStep &step : *steps) {
        ++out.steps;
        ASSERT_NE(bool(step.kernel), bool(step.gemm)) << "a step is a kernel or a GEMM";
        if (step.gemm) {
          ++out.gemms;
          const GemmStep &g = *step.gemm;
          EXPECT_GT(g.m, kMaxGemvTokens) << "only prefill runs through cuBLASLt";
          EXPECT_GT(g.n, 0);
          EXPECT_GT(g.k, 0);
          continue;
        }
        const EmittedKernel &k = *step.kernel;
        EXPECT_EQ(k.regionKind, region.getKind().str());
        EXPECT_TRUE(llvm::StringRef(k.name).starts_with("weft_")) << k.name;
        if (k.instance.empty()) {
          // An entry the emitter still writes: extern "C", named in the source.
          EXPECT_NE(k.source.find("extern \"C\" __global__"), std::string::npos);
          EXPECT_NE(k.source.find(k.name + "("), std::string::npos) << k.name;
        } else {
          // A library template instance: the source is a Config, nothing else.
          EXPECT_TRUE(llvm::StringRef(k.instance).starts_with("weft::kernels::")) << k.instance;
          EXPECT_NE(k.instance.find("<Config"), std::string::npos) << k.instance;
          EXPECT_EQ(k.source.find("__global__"), std::string::npos) << k.name;
          EXPECT_EQ(k.source.find(k.name), std::string::npos) << k.name;
          EXPECT_NE(k.source.find(std::string("static constexpr bool RELEASE_EARLY = ") +
                                  (k.releaseEarly ? "true" : "false")),
                    std::string::npos)
              << k.name;
        }
        EXPECT_FALSE(k.params.empty()) << k.name;
        int threads = k.block[0] * k.block[1] * k.block[2];
        EXPECT_GE(threads, 1) << k.name;
        EXPECT_LE(threads, 1024) << k.name;
        for (int d : k.grid)
          EXPECT_GE(d, 1) << k.name;
        EXPECT_LE(k.grid[1], 65535) << k.name;
        EXPECT_LE(k.sharedBytes, 48 * 1024) << k.name;
        for (const ParamBinding &p : k.params) {
          EXPECT_FALSE(p.name.empty()) << k.name;
          if (p.kind == ParamBinding::Kind::Scratch)
            EXPECT_GT(p.bytes, 0u) << k.name << " " << p.name;
          if (p.kind == ParamBinding::Kind::RegionInput)
            EXPECT_LT(p.index, int64_t(region.getInputs().size())) << k.name;
          if (p.kind == ParamBinding::Kind::RegionResult)
            EXPECT_LT(p.index, int64_t(region.getNumResults())) << k.name;
        }
        auto [it, inserted] = out.kernels.try_emplace(k.source + '\0' + k.instance, k);
        if (!inserted)
          EXPECT_EQ(it->second.name, k.name) << "one source and entry, one name";
      }
    });
  }

  mlir::MLIRContext context;
};

// Compiles the kernels for both architectures through a fresh cache.
void compileAll(const Emission &e, llvm::StringRef what) {
  std::vector<EmittedKernel> kernels;
  std::set<std::string> names;
  for (const auto &[source, k] : e.kernels) {
    kernels.push_back(k);
    EXPECT_TRUE(names.insert(k.name).second) << "two sources named " << k.name;
  }
  weft::testing::TempDir dir;
  KernelCache cache(dir.path());
  for (const char *arch : {"sm_86", "sm_90"}) {
    auto start = Clock::now();
    llvm::Expected<std::vector<CompiledKernel>> compiled = compileKernels(kernels, arch, &cache);
    ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
    ASSERT_EQ(compiled->size(), kernels.size());
    for (size_t i = 0; i < kernels.size(); ++i) {
      const CompiledKernel &c = (*compiled)[i];
      EXPECT_EQ(c.name, kernels[i].name);
      EXPECT_EQ(c.arch, arch);
      EXPECT_FALSE(c.cubin.empty()) << c.name;
      EXPECT_NE(c.ptx.find(".entry " + c.symbol), std::string::npos) << c.name;
    }
    std::printf("[ compiled ] %s: %zu kernels for %s in %.1f s\n", what.str().c_str(),
                kernels.size(), arch, secondsSince(start));
  }
}

TEST_F(KernelEmitterTest, EveryBuiltinModelEmitsAndCompiles) {
  auto start = Clock::now();
  Emission all;
  for (const std::string &model : builtinModelNames()) {
    mlir::OwningOpRef<mlir::ModuleOp> module = compile(model, /*sampling=*/false);
    ASSERT_TRUE(module);
    emitAll(*module, model, all);
  }
  // The sampling head, and decode buckets that take the tensor-core GEMV.
  {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        compile("qwen2.5-1.5b", /*sampling=*/true, {1, 16});
    ASSERT_TRUE(module);
    emitAll(*module, "qwen2.5-1.5b (sampling)", all);
  }
  for (const char *kind : {"embedding", "rms_norm_linear", "rope_kv_write",
                           "rms_norm_linear_rope_kv_write", "linear_residual",
                           "rms_norm_linear_swiglu", "rms_norm_logits_argmax",
                           "rms_norm_logits_sample"})
    EXPECT_TRUE(all.kinds.count(kind)) << kind;
  EXPECT_EQ(all.kinds.count("attention"), size_t(kHaveAttention));
  EXPECT_GT(all.gemms, 0u);
  std::printf("[ emitted  ] %zu regions, %zu steps (%zu GEMMs), %zu distinct kernels in %.1f s\n",
              all.regions, all.steps, all.gemms, all.kernels.size(), secondsSince(start));
  compileAll(all, "all built-in models");
}

// Token selection reads its logits row by 16-byte loads where the
// vocabulary is a multiple of 4 (every built-in model's) and one float at a
// time otherwise: a vocabulary of 32001 (Llama 2 with a pad token) takes the
// second path, greedy and sampling, for both architectures.
TEST_F(KernelEmitterTest, SelectionKernelsCompileForAnOddVocabulary) {
  Emission odd;
  for (bool sampling : {false, true}) {
    llvm::Expected<ModelConfig> config = getBuiltinModel("llama-3.2-1b");
    ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
    config->vocabSize = 32001;
    ImportOptions io;
    io.sampling = sampling;
    mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, *config, io);
    ASSERT_TRUE(module);
    mlir::PassManager pm(&context);
    CompileOptions co;
    co.maxBatch = 2;
    co.prefillChunks = {32};
    buildDefaultPipeline(pm, co);
    ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
    Emission all;
    emitAll(*module, sampling ? "vocab 32001 (sampling)" : "vocab 32001", all);
    const char *entry =
        sampling ? "weft::kernels::sampleRowsKernel<" : "weft::kernels::argmaxRowsKernel<";
    size_t found = 0;
    for (const auto &[source, k] : all.kernels)
      if (k.instance.find(entry) != std::string::npos) {
        EXPECT_NE(source.find("V = 32001"), std::string::npos) << k.name;
        odd.kernels.emplace(source, k);
        ++found;
      }
    EXPECT_GE(found, 1u) << entry;
  }
  compileAll(odd, "selection kernels, vocabulary 32001");
}

TEST_F(KernelEmitterTest, EmissionIsDeterministic) {
  mlir::OwningOpRef<mlir::ModuleOp> a = compile("llama-3.2-1b", false);
  mlir::OwningOpRef<mlir::ModuleOp> b = compile("llama-3.2-1b", false);
  Emission ea, eb;
  emitAll(*a, "a", ea);
  emitAll(*b, "b", eb);
  ASSERT_EQ(ea.kernels.size(), eb.kernels.size());
  for (auto ia = ea.kernels.begin(), ib = eb.kernels.begin(); ia != ea.kernels.end(); ++ia, ++ib)
    EXPECT_EQ(ia->second.name, ib->second.name);
}

// Every dimension is a constant of the source, and the launch matches it.
// Qwen2's QKV projection carries RoPE and the cache write as its epilogue:
// a column is the pair (i, i + 64) of a head.
TEST_F(KernelEmitterTest, ProjectionKernelsAreSpecialized) {
  mlir::OwningOpRef<mlir::ModuleOp> module = compile("qwen2.5-7b", false);
  ASSERT_TRUE(module);
  bool sawQkv = false, sawPrefill = false;
  auto paramNames = [](const EmittedKernel &k) {
    std::vector<std::string> names;
    for (const ParamBinding &p : k.params)
      names.push_back(p.name);
    return names;
  };
  module->walk([&](FusionOp region) {
    if (region.getKind() != "rms_norm_linear_rope_kv_write" || (sawQkv && sawPrefill))
      return;
    auto fn = region->getParentOfType<mlir::func::FuncOp>();
    llvm::Expected<std::vector<EmittedStep>> steps = emitRegion(region, EmitOptions{});
    ASSERT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
    if (fn.getName() == "decode_b1" && !sawQkv) {
      sawQkv = true;
      ASSERT_EQ(steps->size(), 1u); // one kernel: no RoPE kernel after it
      const EmittedKernel &k = *steps->front().kernel;
      EXPECT_NE(k.source.find("static constexpr int T = 1, TILES = 1, K = 3584, NW = 4608, NC = 2304;"),
                std::string::npos)
          << k.source;
      EXPECT_NE(k.source.find("RPC = 2"), std::string::npos);
      EXPECT_NE(k.source.find("return col / 64 * 128 + j * 64 + col % 64;"), std::string::npos);
      EXPECT_NE(k.source.find("__nv_bfloat16"), std::string::npos);
      // 28 query heads rotated and yielded, 4 key heads rotated and cached,
      // 4 value heads cached.
      // Pointers (the entry's pack): 0 bias, 1 positions, 2-5 the cache
      // write's slots, block table and caches, 6 the query.
      EXPECT_NE(k.source.find("static constexpr int HEADS = 28, TABLE = 0, OUT = 6, OUTS = 1;"),
                std::string::npos)
          << k.source;
      EXPECT_NE(k.source.find("static constexpr int HEADS = 4, TABLE = 0, CACHE = 1;"),
                std::string::npos);
      EXPECT_NE(k.source.find("static constexpr int HEADS = 4, CACHE = 2;"), std::string::npos);
      // Qwen2's bias first, on both rows of each pair.
      EXPECT_NE(k.source.find("using Epilogue = weft::kernels::RopeEpilogue<weft::kernels::Bias<0>, "
                              "1, weft::kernels::CacheWrite<1, 2, 3, 4, 5>, Heads0, Heads1, "
                              "Heads2>;"),
                std::string::npos);
      EXPECT_EQ(k.instance, "weft::kernels::gemvKernel<Config, const __nv_bfloat16, const int, "
                            "const int, const int, Config::cache_t, Config::cache_t, "
                            "__nv_bfloat16>");
      // Qwen2's Q/K/V bias, the positions and slots, the cache, the query.
      std::vector<std::string> names = paramNames(k);
      for (const char *n : {"bias", "positions", "slots", "block_tables", "k_cache", "v_cache",
                            "out0"})
        EXPECT_TRUE(llvm::is_contained(names, n)) << n;
      EXPECT_FALSE(llvm::is_contained(names, "out1"));
    }
    if (fn.getName() == "prefill_c128" && !sawPrefill) {
      sawPrefill = true;
      ASSERT_EQ(steps->size(), 3u); // RMSNorm, GEMM, RoPE + cache write over its rows
      ASSERT_TRUE(steps->at(1).gemm);
      const GemmStep &g = *steps->at(1).gemm;
      EXPECT_EQ(g.m, 128);
      EXPECT_EQ(g.n, 4608);
      EXPECT_EQ(g.k, 3584);
      EXPECT_EQ(g.cType, ElementType::F32);
      EXPECT_FALSE(g.bias.has_value()) << "the epilogue adds the bias, then rounds";
      EXPECT_EQ(g.a.kind, ParamBinding::Kind::Scratch);
      EXPECT_EQ(g.c.kind, ParamBinding::Kind::Scratch);
      const EmittedKernel &rows = *steps->at(2).kernel;
      EXPECT_NE(rows.source.find("using Epilogue = weft::kernels::RopeEpilogue<"),
                std::string::npos)
          << rows.source;
      EXPECT_EQ(llvm::StringRef(rows.instance).starts_with("weft::kernels::gemvReduceKernel<Config,"),
                true);
      EXPECT_EQ(rows.grid[2], 128);
      EXPECT_TRUE(llvm::is_contained(paramNames(rows), "bias"));
    }
  });
  EXPECT_TRUE(sawQkv);
  EXPECT_TRUE(sawPrefill);
}

TEST_F(KernelEmitterTest, UnsupportedRegionNamesItsKind) {
  const char *ir = R"mlir(
func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = weft.fusion "mystery" (%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %s = weft.silu %a : tensor<2x8xf32>
    weft.yield %s : tensor<2x8xf32>
  }
  return %y : tensor<2x8xf32>
}
)mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
  ASSERT_TRUE(module);
  FusionOp region;
  module->walk([&](FusionOp f) { region = f; });
  llvm::Expected<std::vector<EmittedStep>> steps = emitRegion(region, EmitOptions{});
  ASSERT_FALSE(bool(steps));
  std::string message = llvm::toString(steps.takeError());
  EXPECT_NE(message.find("'mystery'"), std::string::npos) << message;
}

// The layers of a batch-1 decode function, as LowerToPlan hands them to
// emitDecodeStream: every region from the first QKV region on, while the
// kinds follow kDecodeStreamLayerKinds.
std::vector<FusionOp> decodeLayers(mlir::ModuleOp module) {
  std::vector<FusionOp> run;
  module.walk([&](mlir::func::FuncOp fn) {
    if (fn.getSymName() != "decode_b1")
      return;
    for (FusionOp r : fn.getBody().front().getOps<FusionOp>()) {
      const size_t per = std::size(kDecodeStreamLayerKinds);
      if (r.getKind() == kDecodeStreamLayerKinds[run.size() % per])
        run.push_back(r);
      else if (!run.empty())
        break;
    }
  });
  run.resize(run.size() / std::size(kDecodeStreamLayerKinds) * std::size(kDecodeStreamLayerKinds));
  return run;
}

// An H200 for emitDecodeStream: sm_90, 132 SMs.
EmitOptions h200() {
  EmitOptions o;
  o.computeCapability = 90;
  o.smCount = 132;
  return o;
}

// The steps emitDecodeStream makes of the 32 Llama 3.1 8B layers of
// `module`'s decode_b1 for an H200, or `options` (none, and `why`, if it
// refuses them).
void emitLlamaStream(mlir::ModuleOp module, std::vector<EmittedStep> &steps, std::string &why,
                     const EmitOptions &options = h200()) {
  std::vector<FusionOp> layers = decodeLayers(module);
  ASSERT_EQ(layers.size(), 32u * 5);
  llvm::Expected<std::vector<EmittedStep>> emitted = emitDecodeStream(layers, options, why);
  ASSERT_TRUE(bool(emitted)) << llvm::toString(emitted.takeError());
  steps = std::move(*emitted);
}

// The reset and stream kernels compile for sm_90 through NVRTC.
void expectStreamCompiles(const std::vector<EmittedStep> &steps) {
  ASSERT_EQ(steps.size(), 2u);
  weft::testing::TempDir dir;
  KernelCache cache(dir.path());
  llvm::Expected<std::vector<CompiledKernel>> compiled =
      compileKernels({*steps[0].kernel, *steps[1].kernel}, "sm_90", &cache);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  EXPECT_FALSE((*compiled)[1].cubin.empty());
}

// Llama 3.1 8B's batch-1 step becomes one cooperative kernel (its counters
// zeroed by a launch before it) binding every layer's weights and caches,
// compiled for sm_90; models or GPUs it does not cover say why.
TEST_F(KernelEmitterTest, DecodeStreamKernelCoversLlamaLayersAndSaysWhyNot) {
  mlir::OwningOpRef<mlir::ModuleOp> module = compile("llama-3.1-8b", false);
  ASSERT_TRUE(module);
  std::vector<FusionOp> layers = decodeLayers(*module);
  EmitOptions o = h200();
  std::string why;
  std::vector<EmittedStep> emitted;
  ASSERT_NO_FATAL_FAILURE(emitLlamaStream(*module, emitted, why));
  ASSERT_EQ(emitted.size(), 2u) << why;
  const EmittedKernel &reset = *emitted[0].kernel, &stream = *emitted[1].kernel;
  EXPECT_FALSE(reset.cooperative);
  EXPECT_TRUE(stream.cooperative);
  EXPECT_EQ(stream.grid[0], 132);
  EXPECT_EQ(stream.block[0], 288);
  EXPECT_GT(stream.sharedBytes, 150 * 1024);
  EXPECT_LE(stream.sharedBytes, 227 * 1024);
  ASSERT_EQ(stream.params.size(), 8u + 8u * 32u);
  EXPECT_EQ(stream.params[4].name, "out");
  EXPECT_EQ(stream.params[4].kind, ParamBinding::Kind::RegionResult);
  EXPECT_EQ(stream.params[4].region, int64_t(layers.size() - 1));
  // Layer 31's caches and down projection weights, from its own regions.
  const ParamBinding &k31 = stream.params[8 + 8 * 31 + 2], &down31 = stream.params.back();
  EXPECT_EQ(k31.kind, ParamBinding::Kind::KCache);
  EXPECT_EQ(k31.index, 31);
  EXPECT_EQ(down31.kind, ParamBinding::Kind::RegionInput);
  EXPECT_EQ(down31.region, int64_t(layers.size() - 1));
  EXPECT_NE(stream.source.find("LAYERS = 32, HIDDEN = 4096, FFN = 14336"), std::string::npos);
  // Six 32 KiB stages, at most two of them requested and not landed.
  EXPECT_NE(stream.source.find("STAGES = 6, IN_FLIGHT = 2, STAGE_BYTES = 32768"),
            std::string::npos);
  // The reset and the stream share the counters' scratch buffer.
  EXPECT_EQ(reset.params[0].kind, ParamBinding::Kind::Scratch);
  EXPECT_EQ(reset.params[0].index, stream.params[7].index);
  EXPECT_EQ(reset.params[0].bytes, stream.params[7].bytes);
  expectStreamCompiles(emitted);

  o.computeCapability = 86;
  llvm::Expected<std::vector<EmittedStep>> steps = emitDecodeStream(layers, o, why);
  ASSERT_TRUE(bool(steps));
  EXPECT_TRUE(steps->empty());
  EXPECT_NE(why.find("sm_90"), std::string::npos) << why;

  o.computeCapability = 90;
  // Rows that are not whole 2048-wide slices (Llama 3.2 3B's 3072) and one
  // query head per KV head (Llama 2 7B) are taken too.
  for (const char *model : {"llama-3.2-3b", "llama-2-7b"}) {
    mlir::OwningOpRef<mlir::ModuleOp> other = compile(model, false);
    ASSERT_TRUE(other);
    steps = emitDecodeStream(decodeLayers(*other), o, why);
    ASSERT_TRUE(bool(steps)) << model << ": " << llvm::toString(steps.takeError());
    EXPECT_EQ(steps->size(), 2u) << model << ": " << why;
  }
  for (auto [model, reason] : {std::pair<const char *, const char *>{"qwen2.5-7b", "bias"},
                               {"llama-3.2-1b", "head_dim 64"}}) {
    mlir::OwningOpRef<mlir::ModuleOp> other = compile(model, false);
    ASSERT_TRUE(other);
    std::vector<FusionOp> run = decodeLayers(*other);
    ASSERT_FALSE(run.empty()) << model;
    steps = emitDecodeStream(run, o, why);
    ASSERT_TRUE(bool(steps)) << model << ": " << llvm::toString(steps.takeError());
    EXPECT_TRUE(steps->empty()) << model;
    EXPECT_NE(why.find(reason), std::string::npos) << model << ": " << why;
  }
  // Gemma 2's layer (post-norms after attention and the MLP) is other
  // regions: five of them from its first QKV region are refused by kind.
  mlir::OwningOpRef<mlir::ModuleOp> gemma = compile("gemma-2-9b", false);
  ASSERT_TRUE(gemma);
  std::vector<FusionOp> five;
  gemma->walk([&](mlir::func::FuncOp fn) {
    if (fn.getSymName() != "decode_b1")
      return;
    for (FusionOp r : fn.getBody().front().getOps<FusionOp>())
      if (five.size() < 5 && (!five.empty() || r.getKind() == kDecodeStreamLayerKinds[0]))
        five.push_back(r);
  });
  ASSERT_EQ(five.size(), 5u);
  steps = emitDecodeStream(five, o, why);
  ASSERT_TRUE(bool(steps)) << llvm::toString(steps.takeError());
  EXPECT_TRUE(steps->empty());
  EXPECT_NE(why.find(" is '"), std::string::npos) << why;
}

// With 4-bit codes (--weight-dtype int4: 16-row tiles, a pair per 128
// inputs) the stream kernel binds each projection's codes and pairs and
// compiles for sm_90, from an f16 model and from a bf16 one.
TEST_F(KernelEmitterTest, DecodeStreamKernelTakesFourBitCodes) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      compile("llama-3.1-8b", false, {}, 4, io::DType::F16);
  ASSERT_TRUE(module);
  std::string why;
  std::vector<EmittedStep> emitted;
  ASSERT_NO_FATAL_FAILURE(emitLlamaStream(*module, emitted, why));
  ASSERT_EQ(emitted.size(), 2u) << why;
  const EmittedKernel &stream = *emitted[1].kernel;
  EXPECT_NE(stream.name.find("_int4"), std::string::npos) << stream.name;
  EXPECT_NE(stream.source.find("BITS = 4"), std::string::npos);
  // Four stages, no cap on those in flight (4-bit consumers set the pace).
  EXPECT_NE(stream.source.find("STAGES = 4, IN_FLIGHT = 4, STAGE_BYTES = 32768"),
            std::string::npos);
  EXPECT_LE(stream.sharedBytes, 227 * 1024);
  // Per layer: the 8 of 16-bit weights, then the pairs of its 4 projections.
  ASSERT_EQ(stream.params.size(), 8u + 12u * 32u);
  const ParamBinding &qkv0 = stream.params[8 + 1], &qkvPairs0 = stream.params[8 + 8];
  EXPECT_EQ(qkv0.part, 0);
  EXPECT_EQ(qkvPairs0.kind, ParamBinding::Kind::RegionInput);
  EXPECT_EQ(qkvPairs0.index, qkv0.index);
  EXPECT_EQ(qkvPairs0.region, qkv0.region);
  EXPECT_EQ(qkvPairs0.part, 1);
  EXPECT_EQ(qkvPairs0.name, "l0_qkv_pairs");
  EXPECT_EQ(stream.params.back().name, "l31_down_pairs");
  EXPECT_EQ(stream.params.back().part, 1);
  EXPECT_EQ(stream.block[0], 9 * 32);
  EXPECT_NE(stream.source.find("GROUP = 4, CW = 8;"), std::string::npos);
  expectStreamCompiles(emitted);

  // 16 consumer warps (weft-compile --decode-stream-warps=16): 17 warps a
  // block, a stage's 128-input steps shared by all 16.
  EmitOptions sixteen = h200();
  sixteen.decodeStreamWarps = 16;
  ASSERT_NO_FATAL_FAILURE(emitLlamaStream(*module, emitted, why, sixteen));
  ASSERT_EQ(emitted.size(), 2u) << why;
  EXPECT_EQ(emitted[1].kernel->block[0], 17 * 32);
  EXPECT_NE(emitted[1].kernel->source.find("GROUP = 4, CW = 16;"), std::string::npos);
  expectStreamCompiles(emitted);

  mlir::OwningOpRef<mlir::ModuleOp> bf16 = compile("llama-3.1-8b", false, {}, 4);
  ASSERT_TRUE(bf16);
  ASSERT_NO_FATAL_FAILURE(emitLlamaStream(*bf16, emitted, why));
  ASSERT_EQ(emitted.size(), 2u) << why;
  EXPECT_NE(emitted[1].kernel->name.find("_bf16_int4"), std::string::npos);
  expectStreamCompiles(emitted);
}

// 8-bit codes with one scale per row (--weight-dtype int8: a (scale, zero)
// pair per row; fp8: E4M3 codes, an f32 scale per row) stream in whole rows,
// twice the rows of 16-bit weights a stage, with each projection's pairs or
// scales beside its codes; they compile for sm_90 from f16 and bf16 models.
// 8-bit codes grouped along the row (GPTQ's group 128) are refused with
// the reason.
TEST_F(KernelEmitterTest, DecodeStreamKernelTakesEightBitCodesPerRow) {
  struct Case {
    QuantFormat format;
    io::DType dtype;
    const char *suffix;
  };
  for (const Case &c : {Case{QuantFormat::Int, io::DType::F16, "_f16_int8"},
                        Case{QuantFormat::Int, io::DType::BF16, "_bf16_int8"},
                        Case{QuantFormat::E4M3, io::DType::F16, "_f16_fp8"},
                        Case{QuantFormat::E4M3, io::DType::BF16, "_bf16_fp8"}}) {
    SCOPED_TRACE(c.suffix);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        compile("llama-3.1-8b", false, {}, 8, c.dtype, c.format);
    ASSERT_TRUE(module);
    std::string why;
    std::vector<EmittedStep> emitted;
    ASSERT_NO_FATAL_FAILURE(emitLlamaStream(*module, emitted, why));
    ASSERT_EQ(emitted.size(), 2u) << why;
    const EmittedKernel &stream = *emitted[1].kernel;
    EXPECT_NE(stream.name.find(c.suffix), std::string::npos) << stream.name;
    EXPECT_NE(stream.source.find("BITS = 8"), std::string::npos);
    EXPECT_NE(stream.source.find(c.format == QuantFormat::E4M3 ? "Codes::E4M3" : "Codes::Int"),
              std::string::npos);
    EXPECT_NE(stream.source.find("using w_t = unsigned char"), std::string::npos);
    EXPECT_NE(stream.source.find("STAGES = 6, IN_FLIGHT = 2, STAGE_BYTES = 32768"),
              std::string::npos);
    EXPECT_LE(stream.sharedBytes, 227 * 1024);
    ASSERT_EQ(stream.params.size(), 8u + 12u * 32u);
    const ParamBinding &down31 = stream.params[8 + 12 * 31 + 7],
                       &downScales31 = stream.params.back();
    EXPECT_EQ(downScales31.name, "l31_down_pairs");
    EXPECT_EQ(downScales31.index, down31.index);
    EXPECT_EQ(downScales31.region, down31.region);
    EXPECT_EQ(downScales31.part, 1);
    expectStreamCompiles(emitted);
  }
  mlir::OwningOpRef<mlir::ModuleOp> grouped =
      compile("llama-3.1-8b", false, {}, 8, io::DType::F16, QuantFormat::Int, 128);
  ASSERT_TRUE(grouped);
  std::string why;
  std::vector<EmittedStep> emitted;
  ASSERT_NO_FATAL_FAILURE(emitLlamaStream(*grouped, emitted, why));
  EXPECT_TRUE(emitted.empty());
  EXPECT_NE(why.find("8-bit codes with a scale per row"), std::string::npos) << why;
}

EmittedKernel tinyKernel(const std::string &name, const std::string &body) {
  EmittedKernel k;
  k.name = name;
  k.regionKind = "test";
  k.source = "#include <cuda_bf16.h>\nextern \"C\" __global__ void " + name +
             "(__nv_bfloat16 *out) {\n" + body + "\n}\n";
  k.block = {32, 1, 1};
  return k;
}

// A library entry: NVRTC instantiates the template from the instance's
// name expression and names the symbol the binary holds, which the cache
// keeps; the source names no entry of its own.
TEST(NvrtcTest, LibraryTemplateInstancesGetTheirLoweredSymbol) {
  weft::testing::TempDir dir;
  KernelCache cache(dir.path());
  EmittedKernel k;
  k.name = "weft_test_softcap";
  k.regionKind = "test";
  k.source = "#include \"weft/softcap.cuh\"\n\nstruct Config {\n"
             "  static constexpr int V = 1000, THREADS = 256;\n"
             "  static constexpr float CAP = 30.0f, INV_CAP = 0.0333333351f;\n"
             "  static constexpr bool RELEASE_EARLY = false;\n};\n";
  k.instance = "weft::kernels::softcapRowsKernel<Config>";
  k.block = {256, 1, 1};
  llvm::Expected<CompiledKernel> compiled = compileKernel(k, "sm_90", &cache);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  EXPECT_EQ(compiled->name, "weft_test_softcap");
  EXPECT_EQ(compiled->symbol, "_ZN4weft7kernels17softcapRowsKernelI6ConfigEEvPf");
  EXPECT_NE(compiled->ptx.find(".entry " + compiled->symbol), std::string::npos);
  llvm::Expected<CompiledKernel> again = compileKernel(k, "sm_90", &cache);
  ASSERT_TRUE(bool(again)) << llvm::toString(again.takeError());
  EXPECT_TRUE(again->fromCache);
  EXPECT_EQ(again->symbol, compiled->symbol);
  // Another instance of the same source is another kernel.
  EmittedKernel other = k;
  other.instance = "weft::kernels::softcapRowsKernel<Config >";
  EXPECT_NE(kernelCacheKey(other, "sm_90"), kernelCacheKey(k, "sm_90"));
  EXPECT_NE(kernelSourceHash(other), kernelSourceHash(k));
  // An instance that names nothing is a one-line error naming the kernel.
  other.instance = "weft::kernels::noSuchKernel<Config>";
  llvm::Expected<CompiledKernel> bad = compileKernel(other, "sm_90", nullptr);
  ASSERT_FALSE(bool(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("kernel weft_test_softcap (sm_90): NVRTC compilation failed"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(NvrtcTest, CacheServesTheSameBinary) {
  weft::testing::TempDir dir;
  KernelCache cache(dir.path());
  EmittedKernel k =
      tinyKernel("weft_test_cache", "out[threadIdx.x] = __float2bfloat16(threadIdx.x * 0.5f);");
  llvm::Expected<CompiledKernel> first = compileKernel(k, "sm_86", &cache);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  EXPECT_FALSE(first->fromCache);
  EXPECT_FALSE(first->cubin.empty());
  EXPECT_NE(first->ptx.find(".entry weft_test_cache"), std::string::npos);

  llvm::Expected<CompiledKernel> second = compileKernel(k, "sm_86", &cache);
  ASSERT_TRUE(bool(second)) << llvm::toString(second.takeError());
  EXPECT_TRUE(second->fromCache);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->ptx, first->ptx);
  EXPECT_EQ(second->sourceHash, first->sourceHash);
  EXPECT_EQ(second->arch, "sm_86");

  // Another architecture is another entry.
  llvm::Expected<CompiledKernel> other = compileKernel(k, "sm_90", &cache);
  ASSERT_TRUE(bool(other)) << llvm::toString(other.takeError());
  EXPECT_FALSE(other->fromCache);
  EXPECT_NE(kernelCacheKey(k, "sm_86"), kernelCacheKey(k, "sm_90"));

  // A damaged entry is ignored, rebuilt and rewritten.
  std::string path = cache.entryPath(kernelCacheKey(k, "sm_86"));
  std::string bytes = weft::testing::readFile(path);
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x5a;
  weft::testing::writeFile(path, bytes);
  llvm::Expected<CompiledKernel> rebuilt = compileKernel(k, "sm_86", &cache);
  ASSERT_TRUE(bool(rebuilt)) << llvm::toString(rebuilt.takeError());
  EXPECT_FALSE(rebuilt->fromCache);
  EXPECT_EQ(rebuilt->cubin, first->cubin);
  weft::testing::writeFile(path, bytes.substr(0, 10)); // truncated
  EXPECT_FALSE(cache.lookup(kernelCacheKey(k, "sm_86"), k.name));
  ASSERT_TRUE(bool(compileKernel(k, "sm_86", &cache)));
  EXPECT_TRUE(cache.lookup(kernelCacheKey(k, "sm_86"), k.name));

  // clear() empties it.
  ASSERT_FALSE(bool(cache.clear()));
  EXPECT_FALSE(cache.lookup(kernelCacheKey(k, "sm_90"), k.name));
}

TEST(NvrtcTest, CompileErrorIsOneLineNamingTheKernel) {
  EmittedKernel k = tinyKernel("weft_test_broken", "out[threadIdx.x] = undeclared_thing;\nint x = ;");
  llvm::Expected<CompiledKernel> c = compileKernel(k, "sm_86", nullptr);
  ASSERT_FALSE(bool(c));
  std::string message = llvm::toString(c.takeError());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_TRUE(llvm::StringRef(message).starts_with(
      "kernel weft_test_broken (sm_86): NVRTC compilation failed: "))
      << message;
  EXPECT_NE(message.find("undeclared_thing"), std::string::npos) << message;
  EXPECT_NE(message.find(" | "), std::string::npos) << message;
  EXPECT_LT(message.size(), 800u);

  llvm::Expected<CompiledKernel> bad = compileKernel(k, "gfx90a", nullptr);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("kernel weft_test_broken (gfx90a)"),
            std::string::npos);
}

TEST(NvrtcTest, CompileKernelsDeduplicatesAndKeepsOrder) {
  std::vector<EmittedKernel> kernels = {
      tinyKernel("weft_test_a", "out[0] = __float2bfloat16(1.0f);"),
      tinyKernel("weft_test_b", "out[0] = __float2bfloat16(2.0f);"),
      tinyKernel("weft_test_a", "out[0] = __float2bfloat16(1.0f);")};
  llvm::Expected<std::vector<CompiledKernel>> c = compileKernels(kernels, "sm_90", nullptr, 2);
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].name, "weft_test_a");
  EXPECT_EQ((*c)[1].name, "weft_test_b");
  EXPECT_EQ((*c)[2].cubin, (*c)[0].cubin);

  kernels.push_back(tinyKernel("weft_test_bad", "this is not C++;"));
  llvm::Expected<std::vector<CompiledKernel>> bad = compileKernels(kernels, "sm_90", nullptr);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("kernel weft_test_bad (sm_90)"),
            std::string::npos);
}

TEST(NvrtcTest, DefaultCacheDirectory) {
  std::string dir = KernelCache::defaultDirectory();
  EXPECT_TRUE(llvm::StringRef(dir).ends_with("weft/kernels")) << dir;
}

} // namespace
} // namespace weft::cuda

// Tests of the cost model and the partitioner's invariants: weight formats,
// memory accounting, that the chosen plan fits and is never worse than the
// split by memory, and that more bandwidth or NVLink never predicts less.
#include "compiler/Import/Importer.h"
#include "compiler/Partition/Partitioner.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Hardware/Topology.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "targets/CUDA/KernelEmitter.h"

#include <gtest/gtest.h>

#include <utility>

namespace weft::partition {
namespace {

class PartitionerTest : public ::testing::Test {
protected:
  ModelProfile profileOf(const char *name) {
    llvm::Expected<ModelConfig> c = getBuiltinModel(name);
    EXPECT_TRUE(bool(c));
    configs.push_back(std::make_unique<ModelConfig>(*c));
    modules.push_back(importModel(context, *configs.back()));
    mlir::PassManager pm(&context);
    buildFusionPipeline(pm);
    EXPECT_TRUE(mlir::succeeded(pm.run(*modules.back())));
    llvm::Expected<ModelProfile> p = profileModel(*modules.back(), *configs.back());
    EXPECT_TRUE(bool(p)) << llvm::toString(p.takeError());
    return *p;
  }
  // Llama-style defaults (batch 1, context 4096) and the chosen stages.
  void partitionOn(const ModelProfile &p, const hardware::Topology &t, PartitionOptions &o,
                   std::vector<Stage> &stages) {
    llvm::Expected<PartitionOptions> opts = makePartitionOptions(*p.config, "throughput", 1,
                                                                 4096, "");
    ASSERT_TRUE(bool(opts));
    o = *opts;
    llvm::Expected<PartitionResult> r = partitionModel(p, t, o);
    ASSERT_TRUE(bool(r));
    stages = r->best.stages;
  }
  hardware::Topology topology(const char *spec) {
    llvm::Expected<hardware::Topology> t = hardware::parseTopologySpec(spec);
    EXPECT_TRUE(bool(t)) << llvm::toString(t.takeError());
    return *t;
  }

  mlir::MLIRContext context;
  std::vector<std::unique_ptr<ModelConfig>> configs;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
};

TEST(WeightFormatTest, BytesPerFormat) {
  WeightFormat f;
  f.dtype = WeightDType::BF16;
  EXPECT_EQ(f.matrixBytes(4096 * 4096, 4096), 2u * 4096 * 4096);
  f.dtype = WeightDType::Int8;
  EXPECT_EQ(f.matrixBytes(4096 * 4096, 4096), 4096u * 4096 + 2 * 4096);
  f.dtype = WeightDType::Int4;
  EXPECT_EQ(f.matrixBytes(4096 * 4096, 4096), 4096u * 4096 / 2 + 4096u * 4096 / 128 * 2);
  EXPECT_FALSE(bool(parseWeightDType("int3")));
  llvm::consumeError(parseWeightDType("int3").takeError());
}

// The embedding and the LM head stay 16-bit when the layers' projections
// are quantized (checkpoints and --weight-dtype alike), and keep a float
// format as it is.
TEST(WeightFormatTest, OutsideTheLayersQuantizedFormatsAreSixteenBit) {
  for (WeightDType d : {WeightDType::Int4, WeightDType::Int8, WeightDType::FP8}) {
    WeightFormat f;
    f.dtype = d;
    f.zeros = true;
    EXPECT_EQ(f.outsideLayers().matrixBytes(128256 * 4096, 128256), 2u * 128256 * 4096)
        << weightDTypeName(d);
  }
  WeightFormat f32;
  f32.dtype = WeightDType::F32;
  EXPECT_EQ(f32.outsideLayers().matrixBytes(1000, 10), 4000u);
}

TEST(CostModelTest, StepScalesInterpolateInLogTokens) {
  hardware::DeviceProfile d;
  EXPECT_EQ(stepScaleAt(d, 8).weights, 1.0); // uncalibrated
  hardware::DeviceCalibration c;
  c.gpu = "NVIDIA H200";
  c.steps = {{1, 1.0, 2.0}, {4, 1.2, 1.0}};
  c.prefillSteps = {{512, 0.6, 0.6}};
  d.calibration = c;
  EXPECT_DOUBLE_EQ(stepScaleAt(d, 1).weights, 1.0);
  EXPECT_DOUBLE_EQ(stepScaleAt(d, 2).weights, 1.1); // halfway in log2
  EXPECT_DOUBLE_EQ(stepScaleAt(d, 2).attention, 1.5);
  EXPECT_DOUBLE_EQ(stepScaleAt(d, 64).weights, 1.2); // the nearest outside
  EXPECT_DOUBLE_EQ(stepScaleAt(d, 128, /*prefill=*/true).weights, 0.6);
}

// Up to kExpandedCodesAbove tokens, each token past the first adds its
// products of the expanded codes to the stream at a fraction of mma.sync's
// rate: half the profile's peak on Hopper, all of it on Ampere; float
// weights add nothing while the step stays bound by its bytes, and longer
// steps go through the expanded matrix instead.
TEST_F(PartitionerTest, QuantizedTokensAddTheirProductsAtMmaSyncRate) {
  const double elements = 4096.0 * 4096.0;
  RegionTerms r;
  r.kind = "linear";
  r.matrixElements = uint64_t(elements);
  r.matrixRows = 4096;
  r.flopsPerToken = 2 * elements;
  WeightFormat int4, f16;
  int4.dtype = WeightDType::Int4;
  f16.dtype = WeightDType::F16;
  // The builtin profiles: the H200's 762 TFLOP/s measured through cuBLAS
  // (wgmma), the RTX 3090's 71 from its datasheet (mma.sync is its peak).
  for (auto [spec, mma] : {std::pair<const char *, double>{"h200", 381e12}, {"rtx3090", 71e12}}) {
    const hardware::Topology t = topology(spec);
    const hardware::DeviceProfile &d = t.devices[0];
    auto at = [&](const WeightFormat &f, int64_t tokens) {
      return regionsSeconds({r}, d, f, tokens, /*context=*/0);
    };
    EXPECT_DOUBLE_EQ(mmaSyncFlops(d, d.fp16TensorFlops), mma) << spec;
    const double perToken = 2 * elements / (mma * int4.codeTokenFraction());
    EXPECT_NEAR(at(int4, 17) - at(int4, 1), 16 * perToken, 1e-12) << spec;
    // Exactly, at 32 too, where the 3090's FLOPs at the generic compute
    // rate would pass its stream: the per-token term counts them instead.
    EXPECT_NEAR(at(int4, 32) - at(int4, 1), 31 * perToken, 1e-12) << spec;
    EXPECT_DOUBLE_EQ(at(f16, 17), at(f16, 1)) << spec;
    // Past 32 tokens: codes read, the f16 matrix written and read again (4
    // more bytes a weight), and no per-token products: bound by bytes.
    EXPECT_DOUBLE_EQ(at(int4, 34), at(int4, 33)) << spec;
    EXPECT_GT(at(int4, 33), at(int4, 1)) << spec;
  }
}

TEST_F(PartitionerTest, CalibrationScalesPredictionsByPart) {
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("h200");
  PartitionOptions o;
  std::vector<Stage> stages;
  ASSERT_NO_FATAL_FAILURE(partitionOn(p, t, o, stages));
  StepSplit plain = predictStepSeconds(p, t, o, stages, 8, 2048, false);
  EXPECT_GT(plain.attention, 0);
  EXPECT_GT(plain.other, plain.attention);
  // Measured bandwidth 10% below the datasheet's: the weight-streaming part
  // slows by about that; step scales then multiply each part.
  hardware::DeviceCalibration c;
  c.gpu = "NVIDIA H200";
  c.copyBandwidth = t.devices[0].memoryBandwidth * 0.9;
  c.steps = {{8, 1.25, 2.0}};
  t.devices[0].calibration = c;
  StepSplit raw;
  StepSplit cal = predictStepSeconds(p, t, o, stages, 8, 2048, false, &raw);
  EXPECT_GT(raw.other, plain.other * 1.05);
  EXPECT_NEAR(cal.other, raw.other * 1.25, 1e-9);
  EXPECT_NEAR(cal.attention, raw.attention * 2.0, 1e-9);
  // Prefill chunks take the prefill scales (none here), not the decode ones.
  StepSplit chunkRaw;
  StepSplit chunk = predictStepSeconds(p, t, o, stages, 512, 0, true, &chunkRaw);
  EXPECT_NEAR(chunk.total(), chunkRaw.total(), 1e-12);
  // A chunk after cached positions (a prompt's later chunk, or the rest of
  // a prompt after a cached prefix) attends to them too: only its
  // attention grows.
  StepSplit later = predictStepSeconds(p, t, o, stages, 512, 2048, true);
  EXPECT_GT(later.attention, chunk.attention);
  EXPECT_NEAR(later.total() - later.attention, chunk.total() - chunk.attention, 1e-12);
}

// The model-level half of the decode stream kernel's checks
// (cuda::emitDecodeStream): Llama-style layers with head_dim 128 and whole
// widths, in the formats its consumers read.
TEST(CostModelTest, DecodeStreamTakesLlamaStyleLayersInItsFormats) {
  auto takes = [](const char *name, WeightDType dtype, int64_t group = 128,
                  bool grouped8 = false) {
    llvm::Expected<ModelConfig> c = getBuiltinModel(name);
    EXPECT_TRUE(bool(c)) << name;
    WeightFormat f;
    f.dtype = dtype;
    f.groupSize = group;
    f.grouped8 = grouped8;
    return decodeStreamTakes(*c, f);
  };
  for (WeightDType d : {WeightDType::BF16, WeightDType::F16, WeightDType::Int4,
                        WeightDType::Int8, WeightDType::FP8}) {
    EXPECT_TRUE(takes("llama-3.1-8b", d)) << weightDTypeName(d);
    // Llama 2 7B's FFN of 11008 is not whole 1024-input steps.
    EXPECT_EQ(takes("llama-2-7b", d), d != WeightDType::Int4) << weightDTypeName(d);
    EXPECT_FALSE(takes("llama-3.1-70b", d)) << "8 query heads a KV head";
    EXPECT_FALSE(takes("qwen2.5-7b", d)) << "QKV biases";
    EXPECT_FALSE(takes("qwen3-8b", d)) << "QK norms";
    EXPECT_FALSE(takes("gemma-2-9b", d)) << "Gemma's norms, GeGLU, soft-caps";
    EXPECT_FALSE(takes("llama-3.2-1b", d)) << "head_dim 64";
  }
  // Llama 3.2 3B's 3072 is whole in 16-bit slices (64) and in 4-bit
  // codes' 1024-input steps of 8 warps.
  EXPECT_TRUE(takes("llama-3.2-3b", WeightDType::BF16));
  EXPECT_TRUE(takes("llama-3.2-3b", WeightDType::Int4));
  EXPECT_FALSE(takes("llama-3.1-8b", WeightDType::Int4, 64)) << "groups of 64";
  EXPECT_FALSE(takes("llama-3.1-8b", WeightDType::Int8, 128, true)) << "int8 groups";
  EXPECT_FALSE(takes("llama-3.1-8b", WeightDType::F32));
}

// One-token decode on an sm_90 device, one device a stage: each layer its
// bytes at the copy bandwidth plus the format's hand-offs, K/V at the
// stream kernel's attention rate; other steps and devices kernel by kernel.
TEST_F(PartitionerTest, DecodeStreamPricesOneTokenLayers) {
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("h200");
  PartitionOptions o;
  std::vector<Stage> stages;
  ASSERT_NO_FATAL_FAILURE(partitionOn(p, t, o, stages));
  const StepSplit kernels = predictStepSeconds(p, t, o, stages, 1, 512, false);
  const StepSplit kernels8 = predictStepSeconds(p, t, o, stages, 8, 512, false);
  o.decodeStream = true;
  const StepSplit streamed = predictStepSeconds(p, t, o, stages, 1, 512, false);
  EXPECT_LT(streamed.total(), kernels.total());
  EXPECT_DOUBLE_EQ(predictStepSeconds(p, t, o, stages, 8, 512, false).total(),
                   kernels8.total());
  // A layer by hand: weights (and the few activation bytes) at 4.28 TB/s,
  // 512 positions of K/V at 0.27 of it, and the hand-offs.
  const hardware::DeviceProfile &d = t.devices[0];
  uint64_t weights = 0, kv = 0;
  for (const RegionTerms &r : p.layers[0]) {
    weights += o.weights.matrixBytes(r.matrixElements, r.matrixRows) + r.vectorBytes +
               r.actBytesPerToken;
    kv += 512 * r.kvBytesPerTokenPosition;
  }
  StepSplit one;
  const double layer = streamLayerSeconds(p.layers[0], d, o.weights, 512, &one);
  EXPECT_NEAR(one.other, double(weights) / d.memoryBandwidth + o.weights.streamHandoffSeconds(),
              1e-12);
  EXPECT_NEAR(one.attention, double(kv) / (d.memoryBandwidth * 0.27), 1e-12);
  EXPECT_NEAR(layer, one.total(), 1e-15);
  // Fitted on the H200: Llama 3.1 8B in bf16 measured 3.76-3.81 ms at
  // context 128-512 (the LM head a kernel of its own).
  EXPECT_NEAR(streamed.total(), 3.77e-3, 0.08e-3);
  // Not on sm_86, nor tensor parallel.
  hardware::Topology ampere = topology("rtx3090");
  std::vector<Stage> one3090;
  PartitionOptions o3090;
  ASSERT_NO_FATAL_FAILURE(partitionOn(p, ampere, o3090, one3090));
  const double plain = predictStepSeconds(p, ampere, o3090, one3090, 1, 512, false).total();
  o3090.decodeStream = true;
  EXPECT_DOUBLE_EQ(predictStepSeconds(p, ampere, o3090, one3090, 1, 512, false).total(), plain);
  EXPECT_FALSE(o.streams(d, 1, false, 2));
  EXPECT_FALSE(o.streams(d, 1, true, 1));
  EXPECT_TRUE(o.streams(d, 1, false, 1));
}

TEST(CostModelTest, MeasuredAllReduceReplacesTheRing) {
  llvm::Expected<hardware::Topology> t = hardware::parseTopologySpec("2xh200:nvlink");
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  double ring = allReduceSeconds(*t, {0, 1}, 8192);
  EXPECT_NEAR(ring, 2 * t->transferSeconds(0, 1, 4096), 1e-15);
  hardware::AllReduceCalibration m;
  m.devices = {0, 1};
  m.times = {{8192, 20e-6}, {65536, 24e-6}};
  t->allReduces.push_back(m);
  EXPECT_DOUBLE_EQ(allReduceSeconds(*t, {1, 0}, 8192), 20e-6);
  EXPECT_DOUBLE_EQ(allReduceSeconds(*t, {0, 1}, 131072), 48e-6);
  EXPECT_EQ(allReduceSeconds(*t, {0}, 8192), 0);
}

TEST_F(PartitionerTest, PrefillChunkAttendsToHalfItself) {
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("h200");
  PartitionOptions o;
  std::vector<Stage> stages;
  ASSERT_NO_FATAL_FAILURE(partitionOn(p, t, o, stages));
  StepSplit chunk = predictStepSeconds(p, t, o, stages, 512, 0, true);
  StepSplit decode256 = predictStepSeconds(p, t, o, stages, 512, 256, false);
  EXPECT_NEAR(chunk.total(), decode256.total(), 1e-12);
}

TEST_F(PartitionerTest, ProfileCoversEveryLayerAndWeight) {
  ModelProfile p = profileOf("llama-3.1-8b");
  ASSERT_EQ(p.layers.size(), 32u);
  for (const auto &layer : p.layers)
    EXPECT_EQ(layer.size(), 5u); // QKV with RoPE + cache write, attention, O, gate/up, down
  // Per-step weight traffic: every layer matrix once, the embedding's row
  // and the LM head; matches the parameter count minus the unread table.
  WeightFormat bf16;
  uint64_t bytes = 0;
  for (const auto &layer : p.layers)
    bytes += regionsWeightBytes(layer, bf16);
  EXPECT_EQ(bytes, uint64_t(32) * 218112000u * 2u);
  EXPECT_EQ(p.kvBytesPerTokenPerLayer, 2u * 1024u * 2u);
}

TEST_F(PartitionerTest, ChosenFitsAndBeatsMemorySplit) {
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("rtx3090+rtx3060");
  for (int64_t batch : {1, 8, 24, 32, 40}) {
    PartitionOptions o;
    o.batch = batch;
    llvm::Expected<PartitionResult> r = partitionModel(p, t, o);
    ASSERT_TRUE(bool(r)) << batch << ": " << llvm::toString(r.takeError());
    EXPECT_TRUE(r->best.fits);
    for (const DeviceMemory &m : r->best.memory)
      EXPECT_LE(m.total(), m.capacity) << batch;
    ASSERT_TRUE(r->memoryProportional.has_value());
    if (r->memoryProportional->fits)
      EXPECT_GE(r->best.tokensPerSecond, r->memoryProportional->tokensPerSecond) << batch;
    for (const Candidate &c : r->runnersUp) {
      EXPECT_TRUE(c.fits);
      EXPECT_LE(c.tokensPerSecond, r->best.tokensPerSecond * (1 + 1e-9));
    }
  }
}

TEST_F(PartitionerTest, PricesTheExpandedCodesOfLongSteps) {
  // Steps of more than kExpandedCodesAbove (32) tokens expand each
  // quantized projection to a 16-bit scratch matrix; the estimate adds the
  // largest (gate and up).
  static_assert(kExpandedCodesAbove == cuda::kMaxCodeGemvTokens,
                "the partitioner prices what the emitter does");
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("h200");
  auto activations = [&](int64_t chunk) {
    llvm::Expected<PartitionOptions> o =
        makePartitionOptions(*p.config, "throughput", 1, 4096, "int4");
    EXPECT_TRUE(bool(o));
    o->prefillChunk = chunk;
    llvm::Expected<PartitionResult> r = partitionModel(p, t, *o);
    EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
    return r->best.memory[0].activations;
  };
  uint64_t perToken = (3 * 4096 + 4096 + 2 * 1024 + 2 * 14336) * 2; // bf16
  const int64_t above = kExpandedCodesAbove + 1;
  EXPECT_EQ(activations(above) - activations(above - 1), perToken + 2ull * 14336 * 4096 * 2);
}

// A quantized LM head (--lm-head-dtype) stays in the code GEMV up to 64
// tokens where they tile by 16 to 32 (40: two tiles of 20, 64: two of 32),
// reading its codes once per tile; otherwise (33, past 64) it expands them.
TEST_F(PartitionerTest, QuantizedHeadReadsItsCodesPerTile) {
  const double elements = 128256.0 * 4096.0;
  RegionTerms head;
  head.kind = "rms_norm_logits_sample";
  head.inLayer = false;
  head.lmHead = true;
  head.matrixElements = uint64_t(elements);
  head.matrixRows = 128256;
  head.flopsPerToken = 2 * elements;
  WeightFormat f;
  f.dtype = WeightDType::BF16;
  f.lmHead = WeightDType::Int4;
  const hardware::DeviceProfile &d = topology("h200").devices[0];
  auto at = [&](int64_t tokens) { return regionsSeconds({head}, d, f, tokens, /*context=*/0); };
  const double perToken =
      2 * elements / (mmaSyncFlops(d, d.fp16TensorFlops) * f.headFormat().codeTokenFraction());
  const double codes = at(1) - efficiencyFor(head.kind).launchSeconds; // one pass, one token
  EXPECT_EQ(headCodePasses(32), 1);
  EXPECT_EQ(headCodePasses(40), 2);
  EXPECT_EQ(headCodePasses(64), 2);
  EXPECT_EQ(headCodePasses(33), 0);
  EXPECT_EQ(headCodePasses(65), 0);
  EXPECT_NEAR(at(32) - at(1), 31 * perToken, 1e-12);
  EXPECT_NEAR(at(40) - at(1), codes + 39 * perToken, 1e-9); // a second pass over the codes
  EXPECT_NEAR(at(64) - at(40), 24 * perToken, 1e-12);
  EXPECT_EQ(headCodePasses(34), 2); // two tiles of 17
  EXPECT_DOUBLE_EQ(at(35), at(33)); // expanded (tiles of 7 and 11): bound by bytes
  EXPECT_DOUBLE_EQ(at(66), at(65));
}

TEST_F(PartitionerTest, PricesAQuantizedLmHeadInItsFormat) {
  // --lm-head-dtype int4: the head's codes and pairs instead of its 16-bit
  // matrix; steps of more than kExpandedHeadCodesAbove (64) tokens expand
  // them to a 16-bit scratch as big as the head, of which the layers'
  // expansion (gate and up) already holds part.
  static_assert(kExpandedHeadCodesAbove == cuda::kMaxHeadTileTokens,
                "the partitioner prices what the emitter does");
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("h200");
  auto memory = [&](int64_t chunk, bool head) {
    llvm::Expected<PartitionOptions> o =
        makePartitionOptions(*p.config, "throughput", 1, 4096, "int4");
    EXPECT_TRUE(bool(o));
    o->prefillChunk = chunk;
    if (head)
      o->weights.lmHead = WeightDType::Int4;
    llvm::Expected<PartitionResult> r = partitionModel(p, t, *o);
    EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
    return r->best.memory[0];
  };
  const uint64_t vocab = 128256, hidden = 4096, gateUp = 2ull * 14336 * 4096 * 2;
  const uint64_t head16 = vocab * hidden * 2;
  const uint64_t head4 = vocab * hidden / 2 + vocab * (hidden / 128) * 2; // codes, scales
  EXPECT_EQ(memory(64, false).weights - memory(64, true).weights, head16 - head4);
  const int64_t at = kExpandedHeadCodesAbove;
  EXPECT_EQ(memory(at, true).activations, memory(at, false).activations);
  EXPECT_EQ(memory(at + 1, true).activations - memory(at + 1, false).activations,
            head16 - gateUp);
}

TEST_F(PartitionerTest, LatencyObjectivePrefersOneFastDevice) {
  ModelProfile p = profileOf("llama-3.1-8b");
  PartitionOptions o;
  o.objective = Objective::Latency;
  llvm::Expected<PartitionResult> r = partitionModel(p, topology("rtx3090+rtx3060"), o);
  ASSERT_TRUE(bool(r));
  ASSERT_EQ(r->best.stages.size(), 1u);
  EXPECT_EQ(r->best.stages[0].devices, std::vector<int>{0});
}

// Two equally fast choices (one card or the other of a pair): the one that
// leaves more memory free wins, whichever device index it has.
TEST_F(PartitionerTest, TiesGoToTheChoiceWithMoreFreeMemory) {
  ModelProfile p = profileOf("llama-3.2-1b");
  PartitionOptions o;
  o.objective = Objective::Latency;
  for (const char *caps : {"0=16GB", "1=16GB"}) {
    hardware::Topology t = topology("2xrtx3090");
    ASSERT_FALSE(bool(hardware::applyMemoryCaps(t, caps)));
    llvm::Expected<PartitionResult> r = partitionModel(p, t, o);
    ASSERT_TRUE(bool(r)) << llvm::toString(r.takeError());
    ASSERT_EQ(r->best.stages.size(), 1u) << r->best.description;
    int uncapped = caps[0] == '0' ? 1 : 0;
    EXPECT_EQ(r->best.stages[0].devices, std::vector<int>{uncapped}) << caps;
  }
}

TEST_F(PartitionerTest, NVLinkTensorParallelBeatsPipelineForLatency) {
  ModelProfile p = profileOf("llama-3.1-70b");
  PartitionOptions o;
  o.objective = Objective::Latency;
  o.weights.dtype = WeightDType::Int4;
  llvm::Expected<PartitionResult> nv = partitionModel(p, topology("2xrtx3090:nvlink"), o);
  ASSERT_TRUE(bool(nv)) << llvm::toString(nv.takeError());
  ASSERT_EQ(nv->best.stages.size(), 1u);
  EXPECT_EQ(nv->best.stages[0].devices.size(), 2u);
  // Without NVLink there is no tensor parallelism: a pipeline, slower.
  llvm::Expected<PartitionResult> pcie = partitionModel(p, topology("2xrtx3090"), o);
  ASSERT_TRUE(bool(pcie)) << llvm::toString(pcie.takeError());
  EXPECT_EQ(pcie->best.stages.size(), 2u);
  EXPECT_GT(nv->best.tokensPerSecondBatch1, pcie->best.tokensPerSecondBatch1);
}

TEST_F(PartitionerTest, MemoryCapForcesASplit) {
  ModelProfile p = profileOf("llama-3.1-8b");
  hardware::Topology t = topology("2xh200:nvlink");
  PartitionOptions o;
  llvm::Expected<PartitionResult> free = partitionModel(p, t, o);
  ASSERT_TRUE(bool(free));
  ASSERT_FALSE(bool(hardware::applyMemoryCaps(t, "12GB")));
  o.allowHostOffload = false;
  llvm::Expected<PartitionResult> capped = partitionModel(p, t, o);
  ASSERT_TRUE(bool(capped)) << llvm::toString(capped.takeError());
  for (const DeviceMemory &m : capped->best.memory) {
    EXPECT_LE(m.total(), 12000000000u);
  }
  int devicesUsed = 0;
  for (const Stage &s : capped->best.stages)
    devicesUsed += int(s.devices.size());
  EXPECT_EQ(devicesUsed, 2);
}

TEST_F(PartitionerTest, ErrorNamesShortfallAndNearestFit) {
  ModelProfile p = profileOf("llama-3.1-8b");
  PartitionOptions o;
  o.allowHostOffload = false;
  llvm::Expected<PartitionResult> r = partitionModel(p, topology("rtx3060"), o);
  ASSERT_FALSE(bool(r));
  std::string msg = llvm::toString(r.takeError());
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_NE(msg.find("rtx3060-12g #0 short by"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--weight-dtype=int8"), std::string::npos) << msg;
}

TEST_F(PartitionerTest, OptionsAreValidated) {
  llvm::Expected<ModelConfig> c = getBuiltinModel("llama-3.1-8b");
  ASSERT_TRUE(bool(c));
  for (auto [objective, batch, context, dtype] :
       {std::tuple{"speed", 1, 4096, ""}, std::tuple{"latency", 0, 4096, ""},
        std::tuple{"latency", 1, 0, ""}, std::tuple{"latency", 1, 1 << 30, ""},
        std::tuple{"latency", 1, 4096, "int2"}}) {
    llvm::Expected<PartitionOptions> o =
        makePartitionOptions(*c, objective, batch, context, dtype);
    EXPECT_FALSE(bool(o)) << objective << " " << batch << " " << context;
    if (!o) {
      std::string msg = llvm::toString(o.takeError());
      EXPECT_EQ(msg.rfind("--", 0), 0u) << msg;
    }
  }
}

} // namespace
} // namespace weft::partition

// Roofline timing of regions on devices, weight formats, collectives.
#include "compiler/Partition/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace weft::partition {

const char *weightDTypeName(WeightDType dtype) {
  switch (dtype) {
  case WeightDType::F32: return "fp32";
  case WeightDType::F16: return "fp16";
  case WeightDType::BF16: return "bf16";
  case WeightDType::FP8: return "fp8";
  case WeightDType::Int8: return "int8";
  case WeightDType::Int4: return "int4";
  }
  return "unknown";
}

llvm::Expected<WeightDType> parseWeightDType(llvm::StringRef name) {
  std::optional<WeightDType> d =
      llvm::StringSwitch<std::optional<WeightDType>>(name)
          .Case("fp32", WeightDType::F32)
          .Case("fp16", WeightDType::F16)
          .Case("bf16", WeightDType::BF16)
          .Case("fp8", WeightDType::FP8)
          .Case("int8", WeightDType::Int8)
          .Case("int4", WeightDType::Int4)
          .Default(std::nullopt);
  if (!d)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "--weight-dtype: unknown weight dtype '%s' (expected fp32, fp16, "
        "bf16, fp8, int8 or int4)",
        name.str().c_str());
  return *d;
}

WeightFormat WeightFormat::outsideLayers() const {
  if (!quantized()) {
    WeightFormat same = *this;
    same.lmHead.reset();
    return same;
  }
  WeightFormat sixteen;
  sixteen.dtype = WeightDType::BF16;
  return sixteen;
}

WeightFormat WeightFormat::headFormat() const {
  if (!lmHead)
    return outsideLayers();
  WeightFormat head;
  head.dtype = *lmHead;
  head.groupSize = 128;
  return head;
}

// Measured on one H200 with Llama 3.1 8B at batch 1 (docs/benchmarks.md,
// "Quantized projections"): after the step's other kernels (0.7 ms, as
// with fp16 weights), the projections of AWQ int4 codes streamed 1.95 TB/s,
// GPTQ int8 2.52 and FP8 2.92, against 3.6 TB/s for fp16 weights.
double WeightFormat::codeStreamingRate() const {
  switch (dtype) {
  case WeightDType::Int4: return 0.54;
  case WeightDType::Int8: return 0.70;
  case WeightDType::FP8: return 0.81;
  default: return 1.0;
  }
}

// Fitted on one H200 (mma.sync at 381 TFLOP/s: half the builtin profile's
// 762) with Llama 3.1 8B at batches 1, 16 and 32, context 512
// (docs/benchmarks.md, "Quantized projections"): past the streaming term,
// each token added 0.099 ms a step with AWQ int4 codes (0.095 at 16, 0.103
// at 32), 0.173 ms with FP8 (both counts) and 0.17-0.25 ms with GPTQ int8
// (0.22 taken), over 6.98e9 quantized weights: 2 flops each at these
// fractions of mma.sync's rate. Ampere's are assumed the same, not measured.
double WeightFormat::codeTokenFraction() const {
  switch (dtype) {
  case WeightDType::Int4: return 0.37;
  case WeightDType::Int8: return 0.166;
  case WeightDType::FP8: return 0.21;
  default: return 0.0;
  }
}

// Fitted on one H200 (4.28 TB/s copy bandwidth) with Llama 3.1 8B at batch
// 1, each format's step against its bytes at the copy bandwidth, the LM
// head priced as its own kernel (test/gpu/results/stream-variants-2026-12-06.txt,
// in-flight-2026-12-04.txt, quantized-defaults-2026-12-05.txt): 16-bit
// weights 3.76 ms at context 128, where the ring (6 stages) hides all but
// a few us of each layer's hand-offs; 4-bit codes 1.57 ms, whose consumers
// set the pace, so that a full ring hides little (docs/benchmarks.md,
// "Inside a layer of the stream kernel"); 8-bit codes 2.43 (int8) and 2.39
// ms (fp8) at context 512. An H100 measured 1.92 ms for the same int4 plan
// (the fit predicts 1.86 at its datasheet 3.35 TB/s).
double WeightFormat::streamHandoffSeconds() const {
  switch (dtype) {
  case WeightDType::Int4: return 18.5e-6;
  case WeightDType::Int8:
  case WeightDType::FP8: return 14.0e-6;
  default: return 5.5e-6;
  }
}

// The stream kernel's attention reads K/V rows at about this fraction of
// the copy bandwidth: the step grew by 0.115 ms per 1000 positions from
// context 512 to 4000 (32 layers of 4 KB a position) with 16-bit weights
// and 4-bit codes alike (in-flight-2026-12-04.txt).
static constexpr double kStreamAttentionBandwidth = 0.27;

bool decodeStreamTakes(const ModelConfig &config, const WeightFormat &format) {
  const bool llamaStyle =
      (config.family == ModelFamily::Llama || config.family == ModelFamily::Mistral) &&
      !config.qkvBias && !config.oBias && !config.mlpBias &&
      config.hiddenAct == Activation::Silu && config.normWeightOffset == 0.0 &&
      !config.slidingWindow && config.slidingLayers.empty() && !config.attentionSoftcap;
  if (!llamaStyle || config.headDim != 128 || config.numKvHeads <= 0 ||
      config.numHeads % config.numKvHeads != 0 || config.numHeads / config.numKvHeads > 4)
    return false;
  // Every width a whole number of the blocks' slices (8 consumer warps).
  int64_t slice = 64;
  switch (format.dtype) {
  case WeightDType::Int4:
    if (format.groupSize != 128)
      return false;
    slice = 1024; // 128-input steps of 8 warps
    break;
  case WeightDType::Int8:
    if (format.grouped8)
      return false; // 8-bit codes take a scale per row
    break;
  case WeightDType::FP8:
  case WeightDType::F16:
  case WeightDType::BF16:
    break;
  default:
    return false;
  }
  for (int64_t width : {config.hiddenSize, config.intermediateSize, config.qWidth()})
    if (width % slice != 0)
      return false;
  return true;
}

double streamLayerSeconds(llvm::ArrayRef<RegionTerms> layer,
                          const hardware::DeviceProfile &device, const WeightFormat &format,
                          int64_t context, StepSplit *split) {
  const double bandwidth = device.effectiveBandwidth();
  const StepScale scale = stepScaleAt(device, 1);
  double weights = 0, kv = 0;
  for (const RegionTerms &r : layer) {
    weights += double(format.matrixBytes(r.matrixElements, r.matrixRows) + r.vectorBytes) +
               double(r.actBytesPerToken);
    const double ctx =
        double(r.slidingWindow ? std::min(context, r.slidingWindow) : context);
    kv += ctx * double(r.kvBytesPerTokenPosition);
  }
  const double other =
      (weights / bandwidth + format.streamHandoffSeconds()) * scale.weights;
  const double attention = kv / (bandwidth * kStreamAttentionBandwidth) * scale.attention;
  if (split) {
    split->other += other;
    split->attention += attention;
  }
  return other + attention;
}

double mmaSyncFlops(const hardware::DeviceProfile &device, double peak) {
  return device.computeCapability >= 90 ? peak / 2 : peak;
}

uint64_t WeightFormat::matrixBytes(uint64_t elements, uint64_t rows) const {
  switch (dtype) {
  case WeightDType::F32: return elements * 4;
  case WeightDType::F16:
  case WeightDType::BF16: return elements * 2;
  case WeightDType::FP8: return elements + rows * 4;
  case WeightDType::Int8: {
    uint64_t group = uint64_t(std::max<int64_t>(1, groupSize));
    uint64_t scales = grouped8 ? (elements + group - 1) / group : rows;
    return elements + scales * 2 + (zeros ? scales : 0);
  }
  case WeightDType::Int4: {
    uint64_t group = uint64_t(std::max<int64_t>(1, groupSize));
    uint64_t scales = (elements + group - 1) / group;
    return (elements + 1) / 2 + scales * 2 + (zeros ? (scales + 1) / 2 : 0);
  }
  }
  return elements * 2;
}

// Calibrated on the H200 (test/gpu/bench_decode.py and the kernels' own
// timings, Llama 3.1 8B fp16, CUDA graphs): large projections stream at
// ~0.93 of the copy bandwidth (gate/up 235 MB in 58.8 us, down 117 MB in
// 29.8 us), and each region costs ~2 us more (QKV, 50 MB: 16 us), which
// together predict 4.2 ms per decode step against 4.38 ms measured.
// Attention and the small kernels are estimates not yet measured alone.
const Efficiency &efficiencyFor(llvm::StringRef kind) {
  static const Efficiency kProjection{0.93, 0.65, 2e-6};
  static const Efficiency kAttention{0.70, 0.40, 3e-6};
  static const Efficiency kSmall{0.40, 0.30, 2e-6};
  static const Efficiency kHead{0.93, 0.65, 2e-6};
  if (kind.contains("logits"))
    return kHead;
  if (kind.contains("linear"))
    return kProjection;
  if (kind.contains("attention"))
    return kAttention;
  return kSmall;
}

static RegionTerms termsOf(FusionOp region) {
  CostContext noContext;
  noContext.contextLength = 0;
  RegionCost c = estimateRegionCost(region, noContext);
  RegionTerms t;
  t.kind = c.kind;
  t.matrixElements = c.matrixElements;
  t.matrixRows = c.matrixRows;
  t.vectorBytes = c.vectorBytes;
  t.actBytesPerToken = (c.activationBytesRead + c.bytesWritten) / uint64_t(c.tokens);
  t.kvBytesPerTokenPosition = c.kvBytesPerPosition / uint64_t(c.tokens);
  t.flopsPerToken = c.flops / double(c.tokens);
  t.attnFlopsPerTokenPosition = c.attentionFlopsPerPosition / double(c.tokens);
  t.slidingWindow = c.slidingWindow;
  return t;
}

llvm::Expected<ModelProfile> profileModel(ModuleOp fused,
                                          const ModelConfig &config) {
  auto fn = fused.lookupSymbol<func::FuncOp>("forward");
  if (!fn)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "internal: the fused graph has no @forward");
  ModelProfile p;
  p.config = &config;
  p.layers.resize(size_t(config.numLayers));
  bool seenLayer = false;
  fn.walk([&](FusionOp region) {
    CostContext ctx;
    RegionCost c = estimateRegionCost(region, ctx);
    RegionTerms t = termsOf(region);
    if (c.layer >= 0 && c.layer < config.numLayers) {
      p.layers[size_t(c.layer)].push_back(t);
      seenLayer = true;
    } else {
      t.inLayer = false;
      t.lmHead = llvm::StringRef(t.kind).contains("logits");
      (seenLayer ? p.post : p.pre).push_back(t);
    }
  });
  uint64_t esize = io::dtypeSize(config.dtype);
  p.kvBytesPerTokenPerLayer = 2 * uint64_t(config.kvWidth()) * esize;
  p.hiddenBytesPerToken = uint64_t(config.hiddenSize) * esize;
  return p;
}

uint64_t regionsWeightBytes(llvm::ArrayRef<RegionTerms> regions,
                            const WeightFormat &format, int tpDegree) {
  uint64_t bytes = 0;
  for (const RegionTerms &r : regions)
    bytes += (r.inLayer ? format : r.lmHead ? format.headFormat() : format.outsideLayers())
                 .matrixBytes(r.matrixElements, r.matrixRows) +
             r.vectorBytes;
  return bytes / uint64_t(std::max(1, tpDegree));
}

StepScale stepScaleAt(const hardware::DeviceProfile &device, int64_t tokens, bool prefill) {
  StepScale out;
  if (!device.calibration)
    return out;
  const std::vector<hardware::StepScale> &steps =
      prefill ? device.calibration->prefillSteps : device.calibration->steps;
  if (steps.empty())
    return out;
  if (tokens <= steps.front().tokens)
    return {steps.front().weights, steps.front().attention};
  if (tokens >= steps.back().tokens)
    return {steps.back().weights, steps.back().attention};
  // Linear in log2(tokens) between the measured counts around it.
  for (size_t i = 1; i < steps.size(); ++i)
    if (tokens <= steps[i].tokens) {
      const hardware::StepScale &a = steps[i - 1], &b = steps[i];
      double f = (std::log2(double(tokens)) - std::log2(double(a.tokens))) /
                 (std::log2(double(b.tokens)) - std::log2(double(a.tokens)));
      return {a.weights + f * (b.weights - a.weights),
              a.attention + f * (b.attention - a.attention)};
    }
  return out;
}

int64_t headCodePasses(int64_t tokens) {
  if (tokens <= kExpandedCodesAbove)
    return 1;
  if (tokens > kExpandedHeadCodesAbove)
    return 0;
  int64_t tile = kExpandedCodesAbove;
  while (tokens % tile != 0)
    --tile;
  return tile >= 16 ? tokens / tile : 0;
}

double regionsSeconds(llvm::ArrayRef<RegionTerms> regions,
                      const hardware::DeviceProfile &device,
                      const WeightFormat &format, int64_t tokens,
                      int64_t context, int tpDegree, StepSplit *split, bool prefill) {
  const std::optional<hardware::DeviceCalibration> &cal = device.calibration;
  double peak = cal && cal->gemmFlops > 0 ? cal->gemmFlops : device.fp16TensorFlops;
  double bandwidth = device.effectiveBandwidth();
  StepScale scale = stepScaleAt(device, tokens, prefill);
  double tp = double(std::max(1, tpDegree));
  const WeightFormat outside = format.outsideLayers(), head = format.headFormat();
  double seconds = 0;
  for (const RegionTerms &r : regions) {
    const Efficiency &eff = efficiencyFor(r.kind);
    double launch = cal && cal->launchSeconds > 0 ? cal->launchSeconds : eff.launchSeconds;
    bool attention = llvm::StringRef(r.kind).contains("attention");
    double ctx = double(r.slidingWindow ? std::min(context, r.slidingWindow) : context);
    double T = double(tokens);
    const WeightFormat &f = r.inLayer ? format : r.lmHead ? head : outside;
    double matrix = double(f.matrixBytes(r.matrixElements, r.matrixRows));
    double rate = 1.0;
    double perToken = 0; // the code GEMV's products of each token past the first
    if (f.quantized() && r.matrixElements) {
      const int64_t passes =
          r.lmHead ? headCodePasses(tokens) : tokens > kExpandedCodesAbove ? 0 : 1;
      if (passes == 0) {
        matrix += 4.0 * double(r.matrixElements); // f16 written, then read by cuBLASLt
      } else {
        matrix *= double(passes); // the code GEMV reads the codes once per tile
        rate = f.codeStreamingRate();
        perToken = 2.0 * double(r.matrixElements) / tp /
                   (mmaSyncFlops(device, peak) * f.codeTokenFraction());
      }
    }
    double bytes = (matrix + double(r.vectorBytes)) / tp + T * double(r.actBytesPerToken) +
                   T * ctx * double(r.kvBytesPerTokenPosition) / tp;
    double flops = T * (r.flopsPerToken + ctx * r.attnFlopsPerTokenPosition) / tp;
    double memory = bytes / (bandwidth * eff.bandwidth * rate);
    double compute = flops / (peak * eff.compute);
    // The code GEMV: its products for the first token hide under the
    // stream, each further token's add to it at the engine's own rate (the
    // fit's form), which already counts its FLOPs.
    double body = perToken > 0 ? memory + std::max(0.0, T - 1) * perToken
                               : std::max(memory, compute);
    double t = (body + launch) * (attention ? scale.attention : scale.weights);
    seconds += t;
    if (split)
      (attention ? split->attention : split->other) += t;
  }
  return seconds;
}

double allReduceSeconds(const hardware::Topology &topology,
                        llvm::ArrayRef<int> devices, uint64_t bytes) {
  size_t n = devices.size();
  if (n < 2)
    return 0;
  // Measured on the box (weft-detect --calibrate) for this group.
  if (const hardware::AllReduceCalibration *measured = topology.allReduceFor(devices))
    return measured->secondsFor(bytes);
  // Ring: 2(n-1) steps of bytes/n each, paced by the slowest link (whose
  // time includes its latency).
  double slowest = 0;
  for (size_t i = 0; i < n; ++i)
    slowest = std::max(slowest, topology.transferSeconds(devices[i], devices[(i + 1) % n],
                                                         bytes / n));
  return 2.0 * double(n - 1) * slowest;
}

} // namespace weft::partition

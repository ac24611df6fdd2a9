// The cost model: predicted time of each kernel region on a device, of link
// transfers and collectives, and the memory a model needs, from the fused
// graph's per-region bytes and FLOPs and a device profile.
#ifndef WEFT_COMPILER_PARTITION_COSTMODEL_H_
#define WEFT_COMPILER_PARTITION_COSTMODEL_H_

#include "compiler/Analysis/RegionCost.h"
#include "compiler/Import/ModelConfig.h"
#include "compiler/Hardware/Topology.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <optional>
#include <vector>

namespace weft::partition {

// How matrices are stored on the device. Vectors (norms, biases) keep the
// checkpoint's 16-bit dtype.
enum class WeightDType { F32, F16, BF16, FP8, Int8, Int4 };
// Steps of more tokens than this expand each quantized projection's codes
// into a 16-bit scratch matrix (cuda::kMaxCodeGemvTokens; a unit test holds
// the two equal): the memory estimate adds the largest one.
inline constexpr int64_t kExpandedCodesAbove = 32;
// A quantized LM head expands its codes only above this many tokens
// (cuda::kMaxHeadTileTokens; a unit test holds them equal).
inline constexpr int64_t kExpandedHeadCodesAbove = 2 * kExpandedCodesAbove;
// How often the code GEMV reads a quantized LM head's codes in a step of
// `tokens`, as the emitter tiles it (cuda::planGemv: the largest divisor
// of `tokens` up to kExpandedCodesAbove, at least 16 past it), or 0 when it
// expands them for cuBLASLt instead.
int64_t headCodePasses(int64_t tokens);
const char *weightDTypeName(WeightDType dtype);
llvm::Expected<WeightDType> parseWeightDType(llvm::StringRef name);

struct WeightFormat {
  WeightDType dtype = WeightDType::BF16;
  int64_t groupSize = 128; // int4 (int8 when grouped8): elements per fp16 scale
  bool grouped8 = false;   // int8 with a scale per group (GPTQ), not per row
  bool zeros = false;      // a packed zero per group and column (AWQ, GPTQ)
  // Bytes of a matrix of `elements` in `rows` rows: payload plus scales
  // (int8: one 16-bit scale per row or group; int4: one per group; fp8: an
  // f32 per row) and packed zeros. Every format's kernels expand the codes
  // to 16 bits and compute on the 16-bit tensor cores (no FP8 math).
  uint64_t matrixBytes(uint64_t elements, uint64_t rows) const;
  // The format of the matrices outside the decoder layers (the embedding
  // and the LM head): quantized checkpoints and --weight-dtype quantize the
  // layers' projections only, so these stay 16-bit.
  WeightFormat outsideLayers() const;
  // The LM head's dtype when it is quantized apart from the layers
  // (--lm-head-dtype int8|int4|fp8, by round to nearest as --weight-dtype
  // quantizes projections: int4 in groups of 128, int8 and fp8 a scale per
  // row); unset, the head is outsideLayers().
  std::optional<WeightDType> lmHead;
  // The LM head's format (a tied head quantized apart is a copy of the
  // embedding table: the embedding stays outsideLayers()).
  WeightFormat headFormat() const;
  bool quantized() const {
    return dtype == WeightDType::FP8 || dtype == WeightDType::Int8 || dtype == WeightDType::Int4;
  }
  // How fast the decode GEMV streams this format's projections, as a
  // fraction of the rate of 16-bit weights (it expands the codes on the
  // way); 1 for float formats.
  double codeStreamingRate() const;
  // What each token past the first adds to a quantized projection in the
  // decode GEMV (up to kExpandedCodesAbove tokens): its products of the
  // expanded codes (mma.sync, a tile of tokens per weight row), at this
  // fraction of the device's mma.sync peak (mmaSyncFlops); 0 for float
  // formats.
  double codeTokenFraction() const;
  // The decode stream kernel's time a layer beyond its bytes: the hand-offs
  // between its phases (the blocks' releases, the attention window) that its
  // ring of weight stages does not hide (streamLayerSeconds).
  double streamHandoffSeconds() const;
};

// The 16-bit tensor rate of mma.sync, which the generated GEMV uses: the
// device's peak, but half of it from sm_90 on, whose peak needs wgmma
// (Hopper runs mma.sync at its Ampere-like rate per SM and clock).
double mmaSyncFlops(const hardware::DeviceProfile &device, double peak);

// Fraction of peak that a kind of region reaches, and its fixed cost per
// launch. One table (CostModel.cpp) for every kind; measurements on real
// GPUs calibrate it.
struct Efficiency {
  double bandwidth = 0.8;
  double compute = 0.6;
  double launchSeconds = 4e-6;
};
const Efficiency &efficiencyFor(llvm::StringRef regionKind);

// Cost of one region for one token, with the attention terms kept apart so
// that any context length can be priced.
struct RegionTerms {
  std::string kind;
  uint64_t matrixElements = 0, matrixRows = 0, vectorBytes = 0;
  uint64_t actBytesPerToken = 0;       // activations read + written
  uint64_t kvBytesPerTokenPosition = 0;
  double flopsPerToken = 0;
  double attnFlopsPerTokenPosition = 0;
  int64_t slidingWindow = 0;
  bool inLayer = true; // else the embedding or the head (WeightFormat::outsideLayers)
  bool lmHead = false;  // the LM head's region (WeightFormat::headFormat)
};

// The model as the partitioner sees it: per-layer regions plus the regions
// before the first layer (embedding) and after the last (head).
struct ModelProfile {
  const ModelConfig *config = nullptr;
  std::vector<std::vector<RegionTerms>> layers;
  std::vector<RegionTerms> pre, post;
  uint64_t kvBytesPerTokenPerLayer = 0; // K and V, model dtype
  uint64_t hiddenBytesPerToken = 0;     // what crosses a stage boundary
};

// Builds the profile from the fused (not yet specialized) graph: every
// region's RegionCost at one token, grouped by layer.
llvm::Expected<ModelProfile> profileModel(mlir::ModuleOp fused,
                                          const ModelConfig &config);

// A step's seconds by part: attention regions and everything else (what a
// calibration's step scales correct apart).
struct StepSplit {
  double other = 0;
  double attention = 0;
  double total() const { return other + attention; }
};

// The measured-over-predicted scales of a calibrated device at `tokens`
// (linear in log2(tokens) between measured counts, the nearest outside);
// 1 and 1 without a calibration.
struct StepScale {
  double weights = 1, attention = 1;
};
// `prefill`: the scales measured on prefill chunks (from position 0).
StepScale stepScaleAt(const hardware::DeviceProfile &device, int64_t tokens,
                      bool prefill = false);

// Seconds for `regions` on `device` at `tokens` tokens per step with
// `context` cached positions, weights in `format`, sharded `tpDegree` ways.
// A calibrated device's measured bandwidth, GEMM rate, launch time and step
// scales replace the datasheet figures (the prefill scales for `prefill`).
// `split`, when given, accumulates the seconds by part.
double regionsSeconds(llvm::ArrayRef<RegionTerms> regions,
                      const hardware::DeviceProfile &device,
                      const WeightFormat &format, int64_t tokens,
                      int64_t context, int tpDegree = 1, StepSplit *split = nullptr,
                      bool prefill = false);

// Whether the decode stream kernel (weft/decode_stream.cuh; weft-compile
// --decode-stream) takes this model's layers in `format`: Llama-style
// layers (no biases, SiLU, no sliding window, soft-cap or QK norm), head_dim
// 128, at most 4 query heads a KV head, widths whole for its blocks, 16-bit
// weights, 4-bit codes in groups of 128 or 8-bit codes with a scale per row.
// The model-level half of cuda::emitDecodeStream's checks; lowering
// decides for certain (test/Partition/decode_stream_pricing.test compiles
// plans the emitter takes and refuses and checks the report agrees).
bool decodeStreamTakes(const ModelConfig &config, const WeightFormat &format);

// One layer (`layer`: its regions) of a one-token decode step on `device`
// as the decode stream kernel runs it: its weights read at the copy
// bandwidth, its K/V rows at `context` positions at the rate its attention
// items reach, and the hand-offs its ring does not hide
// (WeightFormat::streamHandoffSeconds). A calibrated device's bandwidth and
// step scales apply as in regionsSeconds; `split` accumulates the parts.
double streamLayerSeconds(llvm::ArrayRef<RegionTerms> layer,
                          const hardware::DeviceProfile &device, const WeightFormat &format,
                          int64_t context, StepSplit *split = nullptr);

// Weight bytes of `regions` in `format`, divided over `tpDegree` shards.
uint64_t regionsWeightBytes(llvm::ArrayRef<RegionTerms> regions,
                            const WeightFormat &format, int tpDegree = 1);

// All-reduce of `bytes` over `devices`: the group's measured times when the
// topology has them (weft-detect --calibrate), else a ring over its links.
double allReduceSeconds(const hardware::Topology &topology,
                        llvm::ArrayRef<int> devices, uint64_t bytes);

} // namespace weft::partition

#endif // WEFT_COMPILER_PARTITION_COSTMODEL_H_

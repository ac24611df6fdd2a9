// Decoding the packed tensors of a quantized projection (AWQ, GPTQ; the
// layouts are described at Quantization in ModelConfig.h) back into its
// [out, in] matrix, for the reference interpreter and the checks against
// it; and repacking them into the layout the kernels read, written by the
// compiler into a file beside the plan.
#ifndef WEFT_COMPILER_IMPORT_QUANTIZEDWEIGHTS_H_
#define WEFT_COMPILER_IMPORT_QUANTIZEDWEIGHTS_H_

#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/ModelConfig.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace weft {

// One projection as stored: qweight, qzeros and scales (and g_idx, GPTQ),
// row-major in the shapes expectedTensors lists.
struct PackedProjection {
  int64_t out = 0, in = 0;
  llvm::ArrayRef<int32_t> qweight, qzeros, gIdx;
  llvm::ArrayRef<float> scales;
};

// A compressed-tensors projection (weight_packed, weight_scale) as the GPTQ
// tensors that hold the same weights: the words and scales transposed, the
// zero 2^(bits-1) stored minus one, g_idx input / group. The GPTQ paths
// below then decode and repack it. An error (naming `name`) when the sizes
// disagree with [out, in].
struct GptqTensors {
  int64_t out = 0, in = 0;
  std::vector<int32_t> qweight, qzeros, gIdx;
  std::vector<float> scales;
  PackedProjection view() const {
    PackedProjection p;
    p.out = out, p.in = in, p.qweight = qweight, p.qzeros = qzeros, p.gIdx = gIdx,
    p.scales = scales;
    return p;
  }
};
llvm::Expected<GptqTensors> gptqFromCompressedTensors(const Quantization &quant,
                                                      llvm::StringRef name, int64_t out,
                                                      int64_t in, llvm::ArrayRef<int32_t> packed,
                                                      llvm::ArrayRef<float> scales);

// (q - zero) * scale for every element, rounded to `roundTo` (f16, or bf16
// for a BF16 compressed-tensors checkpoint) as the model's 16-bit
// arithmetic gives it, as the row-major [out, in] matrix. An error (naming
// `name`) when a tensor's size disagrees with the shapes or g_idx names a
// group that does not exist.
llvm::Expected<std::vector<float>> dequantizeProjection(const Quantization &quant,
                                                        llvm::StringRef name,
                                                        const PackedProjection &p,
                                                        io::DType roundTo = io::DType::F16);

// A projection as the kernels read it (weft/mma_weights.cuh, PackedRows):
// row j's codes in in * bits / 32 words, input i at bit
// kernelCodeSlot(i % (32 / bits), bits, format) of word i / (32 / bits);
// integer codes have one (scale, zero) pair per group of `group` inputs of
// each row, in the model's 16-bit type `scaleType` (F16 or BF16); E4M3
// codes have one F32 scale per row.
struct KernelProjection {
  int64_t out = 0, in = 0, bits = 4, group = 0;
  QuantFormat format = QuantFormat::Int;
  io::DType scaleType = io::DType::F16;
  std::vector<uint32_t> codes;     // [out, in * bits / 32]
  std::vector<uint16_t> scales;    // Int: [out, 2 * in / group], (scale, zero) in scaleType
  std::vector<float> rowScales;    // E4M3: [out]
  // The weight as the reference computes with it: Int, (code - zero) *
  // scale rounded to scaleType (as the kernels expand it where a group is
  // narrower than a lane quad's step; elsewhere they scale the step's sums
  // instead, PackedRows::SUM_SCALE); E4M3, code * scale (in f32: the
  // kernels apply the scale to the dot products).
  float weight(int64_t j, int64_t i) const;
  // What the file beside the plan stores of the scales.
  io::DType storedScaleType() const {
    return format == QuantFormat::E4M3 ? io::DType::F32 : scaleType;
  }
  int64_t storedScaleColumns() const { return format == QuantFormat::E4M3 ? 1 : 2 * in / group; }
};

// Integer codes: so that one mask and one OR give a 16-bit pair of
// neighbours; E4M3: in order, so that one conversion gives a pair.
inline int kernelCodeSlot(int k, int bits, QuantFormat format = QuantFormat::Int) {
  return format == QuantFormat::E4M3 ? k * 8 : (k % 2) * 16 + (k / 2) * bits;
}

// The f16 bits of `v`, rounded to nearest even (infinities beyond f16's
// range, NaN kept a NaN).
uint16_t halfBits(float v);
// The bf16 bits of `v`, rounded to nearest even.
uint16_t bfloat16Bits(float v);
// `v` rounded to nearest even to FP8 E4M3 (finite: beyond +-448 saturates),
// and the value of such a byte.
uint8_t e4m3Bits(float v);
float e4m3Value(uint8_t bits);

// Repacks a checkpoint's projection for the kernels. Errors name `name`:
// sizes that disagree with the shapes, or a g_idx that reorders the inputs
// (GPTQ act-order).
llvm::Expected<KernelProjection> repackForKernels(const Quantization &quant,
                                                  llvm::StringRef name,
                                                  const PackedProjection &p,
                                                  io::DType scaleType = io::DType::F16);

// Quantizes the row-major [out, in] matrix `w` (16-bit values of
// `scaleType`, F16 or BF16) for the kernels by round to nearest.
// Int: per row and group of `group` inputs (which divides `in`), symmetric
// (zero 2^(bits-1), scale max|w| / (2^bits - 1) * 2) or asymmetric (scale
// (max - min) / (2^bits - 1), zero from the minimum, at least 1), the scale
// rounded to scaleType before the codes are taken. E4M3 (`group` = `in`):
// per row, scale max|w| / 448 in f32, codes w / scale rounded to E4M3.
// test/Inputs/make_quantized_fixture.py's quantize() and quantize_e4m3()
// are the same rules in numpy.
KernelProjection quantizeForKernels(llvm::ArrayRef<float> w, int64_t out, int64_t in, int bits,
                                    int64_t group, bool symmetric,
                                    QuantFormat format = QuantFormat::Int,
                                    io::DType scaleType = io::DType::F16);

// A quantized projection of the model: its weight name ("...q_proj.weight"),
// [out, in] shape and storage. From a checkpoint stored quantized
// (Checkpoint::quant) it is repacked; from a 16-bit one it is quantized
// with `bits`, `group` and `format`, symmetric for 8-bit integers.
struct QuantizedWeightRef {
  std::string name;
  int64_t out = 0, in = 0;
  int bits = 4;
  int64_t group = 0;
  QuantFormat format = QuantFormat::Int;
  bool tiled = false; // the codes in 16-row tiles (#weft.quant's `tiled`)
};

// Row-major codes ([out, in * bits / 32] words, as KernelProjection holds
// them) in 16-row tiles of 128 inputs, [out / 16][in / 128][16][128 * bits
// / 32] (#weft.quant's `tiled`; out a multiple of 16, in of 128), and back.
std::vector<uint32_t> tileCodes(llvm::ArrayRef<uint32_t> rows, int64_t out, int64_t in, int bits);
std::vector<uint32_t> untileCodes(llvm::ArrayRef<uint32_t> tiles, int64_t out, int64_t in,
                                  int bits);

// What the plan's manifest records of a written file.
struct KernelWeightsFile {
  uint64_t headerSize = 0, fileSize = 0, headerFnv = 0;
};

// Repacks every projection of `weights` from the checkpoint and writes them
// to `path` as a safetensors file of "<name>.codes" (I32; [out, in * bits /
// 32], or tiled [out / 16, 16 * in * bits / 32]) and
// "<name>.scales" (the checkpoint's F16 or BF16 pairs; F32 for E4M3) tensors, in that order (written to a temporary
// file first, then moved into place). `progress(done, total)` in bytes.
llvm::Expected<KernelWeightsFile>
writeKernelWeights(const Checkpoint &checkpoint, llvm::ArrayRef<QuantizedWeightRef> weights,
                   llvm::StringRef path,
                   const std::function<void(uint64_t, uint64_t)> &progress);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_QUANTIZEDWEIGHTS_H_

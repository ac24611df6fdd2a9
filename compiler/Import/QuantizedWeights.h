// Decoding the packed tensors of a quantized projection (AWQ, GPTQ; the
// layouts are described at Quantization in ModelConfig.h) back into its
// [out, in] matrix, for the reference interpreter and the checks against
// it.
#ifndef WEFT_COMPILER_IMPORT_QUANTIZEDWEIGHTS_H_
#define WEFT_COMPILER_IMPORT_QUANTIZEDWEIGHTS_H_

#include "compiler/Import/ModelConfig.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace weft {

// One projection as stored: qweight, qzeros and scales (and g_idx, GPTQ),
// row-major in the shapes expectedTensors lists.
struct PackedProjection {
  int64_t out = 0, in = 0;
  llvm::ArrayRef<int32_t> qweight, qzeros, gIdx;
  llvm::ArrayRef<float> scales;
};

// (q - zero) * scale for every element, rounded to f16 as the model's f16
// arithmetic gives it, as the row-major [out, in] matrix. An error (naming
// `name`) when a tensor's size disagrees with the shapes or g_idx names a
// group that does not exist.
llvm::Expected<std::vector<float>> dequantizeProjection(const Quantization &quant,
                                                        llvm::StringRef name,
                                                        const PackedProjection &p);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_QUANTIZEDWEIGHTS_H_

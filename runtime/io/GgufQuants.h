// Dequantization of ggml's block formats to f32, as llama.cpp defines them
// (the reference interpreter's view of a GGUF model's weights; the GPU
// kernels read their own layouts). Each block holds `elements` values in
// `bytes` bytes (ggmlBlock); the scales are IEEE binary16.
#ifndef WEFT_RUNTIME_IO_GGUFQUANTS_H_
#define WEFT_RUNTIME_IO_GGUFQUANTS_H_

#include "runtime/base/Status.h"

#include <cstdint>

namespace weft::io {

// Decodes `blocks` consecutive blocks of ggml type `type` at `src` (any
// alignment) into blocks * elements floats at `dst`. Supported: F32, F16,
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; any other type is an
// error naming it. Every product and sum is one f32 operation in the order
// the format defines (no fused multiply-add), so the values equal those of
// the `gguf` Python package's reference bit for bit.
Status dequantizeGgml(uint32_t type, const void *src, uint64_t blocks, float *dst);

} // namespace weft::io

#endif // WEFT_RUNTIME_IO_GGUFQUANTS_H_

// A GGUF file's tensors as the Hugging Face checkpoint of the same model
// holds them: names, shapes (GGUF lists dimensions fastest first), values
// dequantized to f32, and the row order of Llama's Q and K projections,
// which GGUF writers permute for llama.cpp's interleaved rotary embedding
// and which is permuted back here.
#ifndef WEFT_COMPILER_IMPORT_GGUFTENSORS_H_
#define WEFT_COMPILER_IMPORT_GGUFTENSORS_H_

#include "compiler/Import/ModelConfig.h"
#include "runtime/io/Gguf.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace weft {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" and the
// other names of the Llama, Qwen2 and Qwen3 layouts (embedding, norms,
// attention and MLP projections, biases, Qwen3's head norms, the LM head);
// nothing for a name those layouts lack.
std::optional<std::string> huggingFaceName(llvm::StringRef ggufName);

// The tensor's shape as Hugging Face writes it (GGUF's dimensions reversed).
std::vector<int64_t> huggingFaceShape(const io::GgufTensor &tensor);

// Whether `hfName` is a projection whose rows GGUF writers permute for
// `config` (Llama's Q and K: llama.cpp rotates interleaved pairs; Qwen2 and
// Qwen3 keep Hugging Face's halves), and with how many heads (0: no).
int64_t permutedHeads(const ModelConfig &config, llvm::StringRef hfName);

// Undoes that permutation of `rows` rows of `cols` values in place: within
// each of `heads` heads, GGUF row 2i + j holds Hugging Face row
// j * (rows per head / 2) + i.
void unpermuteRows(std::vector<float> &values, int64_t rows, int64_t cols, int64_t heads);

// The tensor's values as f32 in Hugging Face's layout (dequantized, rows
// permuted back where needed), read from `bytes`, the whole file.
llvm::Expected<std::vector<float>> readAsHuggingFace(const io::GgufFile &file,
                                                     std::string_view bytes,
                                                     const io::GgufTensor &tensor,
                                                     const ModelConfig &config);

// Checks the file's tensors against what `config`'s model needs: every
// expected tensor present under its GGUF name with the expected shape.
llvm::Error checkGgufTensors(const io::GgufFile &file, const ModelConfig &config);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_GGUFTENSORS_H_

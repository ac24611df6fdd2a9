// A GGUF file's model description as the config.json Hugging Face would
// write for the same model, so one parser (parseModelConfig) and one set
// of family rules read both formats.
#ifndef WEFT_COMPILER_IMPORT_GGUFCONFIG_H_
#define WEFT_COMPILER_IMPORT_GGUFCONFIG_H_

#include "compiler/Import/ModelConfig.h"
#include "runtime/io/Gguf.h"

#include "llvm/Support/Error.h"

#include <string>

namespace weft {

// The config.json text of `file`'s model: general.architecture (llama,
// qwen2, qwen3) and the {arch}.* keys (block_count, embedding_length,
// feed_forward_length, attention.head_count[_kv], attention.key_length,
// attention.layer_norm_rms_epsilon, rope.freq_base, context_length,
// vocab_size, or the tokenizer's token count), the tokenizer's BOS and EOS
// ids, tie_word_embeddings from the absence of output.weight and the dtype
// of its 16-bit tensors. Refused, naming the key: another architecture
// (Gemma 2 too: its attention scale is not in the metadata), a missing or
// non-integer size, and what would change the model but is not read yet:
// rope scaling (rope.scaling.* or a rope_freqs tensor), a sliding window,
// rotary embedding of part of a head.
llvm::Expected<std::string> ggufConfigJson(const io::GgufFile &file);

// parseModelConfig of ggufConfigJson, messages naming the file.
llvm::Expected<ModelConfig> ggufModelConfig(const io::GgufFile &file);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_GGUFCONFIG_H_

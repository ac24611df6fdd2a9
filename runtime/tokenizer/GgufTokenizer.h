// A GGUF file's tokenizer (tokenizer.ggml.*) as the tokenizer.json the
// runtime reads, so one parser serves both formats.
#ifndef WEFT_RUNTIME_TOKENIZER_GGUFTOKENIZER_H_
#define WEFT_RUNTIME_TOKENIZER_GGUFTOKENIZER_H_

#include "runtime/base/Status.h"
#include "runtime/io/Gguf.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <string>

namespace weft::tokenizer {

// The tokenizer.json of `file`: a byte-level BPE (tokenizer.ggml.model
// "gpt2") from tokenizer.ggml.tokens and .merges, control tokens (type 3)
// and user-defined ones (type 4) as added tokens (special for control), and
// the pre-tokenizer tokenizer.ggml.pre names, where it is GPT-2's byte-level
// split ("gpt-2", "smollm"). Refused, naming the key: another model
// (SentencePiece "llama", ...), another pre-tokenizer, a missing or
// mistyped list.
StatusOr<std::string> ggufTokenizerJson(const io::GgufFile &file);

// Tokenizer::fromJson of that.
StatusOr<Tokenizer> ggufTokenizer(const io::GgufFile &file);

} // namespace weft::tokenizer

#endif // WEFT_RUNTIME_TOKENIZER_GGUFTOKENIZER_H_

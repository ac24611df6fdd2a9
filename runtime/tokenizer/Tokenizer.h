// Text <-> token ids from a Hugging Face tokenizer.json (the one a plan
// carries, or a checkpoint's), for BPE tokenizers in the three styles
// checkpoints use: byte-level with a split regex (Llama 3, Qwen2, GPT-2)
// and U+2581 "metaspace" with byte fallback (Llama 2, Mistral).
//
// Supported pieces of the format: added tokens (matched before anything
// else); normalizers NFC (assumed: text is taken as given), Prepend,
// Replace (string patterns), Sequence; pre-tokenizers Split (regex or
// string, Isolated or Removed), ByteLevel, Metaspace, Sequence; the BPE
// model with merges, ignore_merges, byte_fallback and unk; post-processors
// TemplateProcessing, ByteLevel, Sequence; decoders ByteLevel, Replace,
// ByteFallback, Fuse, Strip, Metaspace, Sequence. Anything else is refused
// when loading, with the JSON path of the part.
#ifndef WEFT_RUNTIME_TOKENIZER_TOKENIZER_H_
#define WEFT_RUNTIME_TOKENIZER_TOKENIZER_H_

#include "runtime/base/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::tokenizer {

// The largest tokenizer.json read (real ones are 2-35 MB).
inline constexpr uint64_t kMaxTokenizerBytes = 128u << 20;

class Tokenizer {
public:
  // `name` (a file name) prefixes error messages.
  static StatusOr<Tokenizer> fromJson(std::string_view json, const std::string &name);
  static StatusOr<Tokenizer> fromFile(const std::string &path);

  // Token ids of `text`; `addSpecial` applies the post-processor (e.g. a
  // BOS token). Fails only for text the vocabulary cannot express (no byte
  // fallback and no unknown token).
  StatusOr<std::vector<int32_t>> encode(std::string_view text, bool addSpecial = true) const;
  // The text of `ids`; ids outside the vocabulary become U+FFFD.
  std::string decode(const std::vector<int32_t> &ids, bool skipSpecial = false) const;

  int32_t vocabSize() const; // largest id + 1
  // The id of a token, or -1.
  int32_t tokenId(std::string_view token) const;

  Tokenizer(Tokenizer &&) noexcept;
  Tokenizer &operator=(Tokenizer &&) noexcept;
  ~Tokenizer();

private:
  Tokenizer();
  static StatusOr<Tokenizer> parse(std::string_view json, const std::string &name);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The tokenizer a tool runs with: the file `path` when given (an error if
// it cannot be read), else the tokenizer.json a plan carries
// (`embeddedJson`, named `embeddedName` in messages; empty: none). A plan's
// tokenizer that cannot be read is not an error here: `embeddedProblem`
// says why, and the caller decides whether it needed one.
struct LoadedTokenizer {
  std::optional<Tokenizer> tokenizer;
  Status embeddedProblem = Status::ok();
};
StatusOr<LoadedTokenizer> loadTokenizer(const std::string &path, std::string_view embeddedJson,
                                        const std::string &embeddedName);

} // namespace weft::tokenizer

#endif // WEFT_RUNTIME_TOKENIZER_TOKENIZER_H_

#include "runtime/tokenizer/GgufTokenizer.h"

#include <nlohmann/json.hpp>

namespace weft::tokenizer {

namespace {

Status bad(const io::GgufFile &f, const std::string &what) {
  return invalidArgument(f.path + ": GGUF " + what);
}

// The string list at `key`, or an error naming it.
StatusOr<const std::vector<io::GgufValue> *> strings(const io::GgufFile &f,
                                                     const std::string &key) {
  const io::GgufValue *v = f.find(key);
  if (!v)
    return bad(f, "metadata '" + key + "': missing");
  if (v->type != io::GgufValueType::Array || v->elementType != io::GgufValueType::String)
    return bad(f, "metadata '" + key + "': expected an array of strings");
  return &v->array;
}

} // namespace

StatusOr<std::string> ggufTokenizerJson(const io::GgufFile &f) {
  const io::GgufValue *model = f.find("tokenizer.ggml.model");
  if (!model || model->type != io::GgufValueType::String)
    return bad(f, "metadata 'tokenizer.ggml.model': missing (expected a string)");
  if (model->s != "gpt2")
    return bad(f, "metadata 'tokenizer.ggml.model': '" + model->s +
                      "' is not supported yet (supported: gpt2, byte-level BPE)");
  const io::GgufValue *pre = f.find("tokenizer.ggml.pre");
  const std::string preName = pre && pre->type == io::GgufValueType::String ? pre->s : "";
  if (preName != "gpt-2" && preName != "smollm")
    return bad(f, "metadata 'tokenizer.ggml.pre': '" + preName +
                      "' is not supported yet (supported: gpt-2, smollm: GPT-2's byte-level "
                      "split)");
  StatusOr<const std::vector<io::GgufValue> *> tokens = strings(f, "tokenizer.ggml.tokens");
  if (!tokens.isOk())
    return tokens.status();
  StatusOr<const std::vector<io::GgufValue> *> merges = strings(f, "tokenizer.ggml.merges");
  if (!merges.isOk())
    return merges.status();
  const std::vector<io::GgufValue> *types = nullptr;
  if (const io::GgufValue *t = f.find("tokenizer.ggml.token_type")) {
    if (t->type != io::GgufValueType::Array || t->array.size() != (*tokens)->size())
      return bad(f, "metadata 'tokenizer.ggml.token_type': expected one type a token");
    types = &t->array;
  }

  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (size_t id = 0; id < (*tokens)->size(); ++id) {
    const std::string &text = (**tokens)[id].s;
    if (vocab.contains(text))
      return bad(f, "metadata 'tokenizer.ggml.tokens': token " + std::to_string(id) +
                        " repeats an earlier one");
    vocab[text] = id;
    // ggml token types: 1 normal, 2 unknown, 3 control, 4 user-defined,
    // 5 unused, 6 byte.
    std::optional<uint64_t> type =
        types ? (*types)[id].asUnsigned() : std::optional<uint64_t>(1);
    if (type && (*type == 3 || *type == 4))
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", *type == 4},
                       {"special", *type == 3}});
  }
  nlohmann::json mergeList = nlohmann::json::array();
  for (const io::GgufValue &m : **merges)
    mergeList.push_back(m.s);
  nlohmann::json byteLevel = {{"type", "ByteLevel"},
                              {"add_prefix_space", false},
                              {"trim_offsets", true},
                              {"use_regex", true}};
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", byteLevel},
      {"post_processor", nullptr},
      {"decoder", byteLevel},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", mergeList}, {"byte_fallback", false}}}};
  return j.dump();
}

StatusOr<Tokenizer> ggufTokenizer(const io::GgufFile &file) {
  StatusOr<std::string> json = ggufTokenizerJson(file);
  if (!json.isOk())
    return json.status();
  return Tokenizer::fromJson(*json, file.path);
}

} // namespace weft::tokenizer

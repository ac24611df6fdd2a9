#include "compiler/Import/GgufConfig.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace weft {

namespace {

llvm::Error fail(const io::GgufFile &f, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 (f.path + ": GGUF " + what).str());
}

struct Family {
  const char *gguf, *architecture, *modelType;
};
constexpr Family kFamilies[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
};

} // namespace

llvm::Expected<std::string> ggufConfigJson(const io::GgufFile &f) {
  const io::GgufValue *archValue = f.find("general.architecture");
  if (!archValue || archValue->type != io::GgufValueType::String)
    return fail(f, "metadata 'general.architecture': missing (expected a string)");
  const std::string &arch = archValue->s;
  const Family *family = nullptr;
  for (const Family &fam : kFamilies)
    if (arch == fam.gguf)
      family = &fam;
  if (arch == "gemma2")
    return fail(f, "metadata 'general.architecture': 'gemma2' is not supported yet (GGUF "
                   "metadata lacks its attention scale, query_pre_attn_scalar)");
  if (!family)
    return fail(f, "metadata 'general.architecture': '" + arch +
                       "' is not supported (supported: llama, qwen2, qwen3)");
  auto key = [&](llvm::StringRef k) { return arch + "." + k.str(); };
  llvm::json::Object c;
  c["architectures"] = llvm::json::Array{family->architecture};
  c["model_type"] = family->modelType;
  struct Size {
    const char *gguf, *hf;
    bool required;
  };
  const Size sizes[] = {
      {"block_count", "num_hidden_layers", true},
      {"embedding_length", "hidden_size", true},
      {"feed_forward_length", "intermediate_size", true},
      {"attention.head_count", "num_attention_heads", true},
      {"attention.head_count_kv", "num_key_value_heads", false},
      {"attention.key_length", "head_dim", false},
      {"context_length", "max_position_embeddings", false},
      {"vocab_size", "vocab_size", false},
  };
  for (const Size &s : sizes) {
    const io::GgufValue *v = f.find(key(s.gguf));
    if (!v) {
      if (s.required)
        return fail(f, "metadata '" + key(s.gguf) + "': missing");
      continue;
    }
    std::optional<uint64_t> n = v->asUnsigned();
    if (!n || *n > (uint64_t(1) << 40))
      return fail(f, "metadata '" + key(s.gguf) + "': expected a non-negative integer, got a " +
                         io::ggufValueTypeName(v->type));
    c[s.hf] = int64_t(*n);
  }
  // The vocabulary: the metadata's size, or the tokenizer's token list.
  if (!c.get("vocab_size")) {
    const io::GgufValue *tokens = f.find("tokenizer.ggml.tokens");
    if (!tokens || tokens->type != io::GgufValueType::Array)
      return fail(f, "metadata '" + key("vocab_size") +
                         "' and 'tokenizer.ggml.tokens': missing (the vocabulary size)");
    c["vocab_size"] = int64_t(tokens->array.size());
  }
  struct Number {
    const char *gguf, *hf;
  };
  const Number numbers[] = {
      {"attention.layer_norm_rms_epsilon", "rms_norm_eps"},
      {"rope.freq_base", "rope_theta"},
  };
  for (const Number &n : numbers)
    if (const io::GgufValue *v = f.find(key(n.gguf))) {
      std::optional<double> x = v->asNumber();
      if (!x)
        return fail(f, "metadata '" + key(n.gguf) + "': expected a number, got a " +
                           io::ggufValueTypeName(v->type));
      c[n.hf] = *x;
    }
  // What changes the model but is not read yet: refused rather than ignored.
  for (const auto &[k, v] : f.metadata) {
    llvm::StringRef name(k);
    if (name.starts_with(key("rope.scaling.")))
      return fail(f, "metadata '" + k + "': rope scaling is not supported yet");
    if (name == key("attention.sliding_window"))
      return fail(f, "metadata '" + k + "': sliding-window attention is not supported yet");
    if (name == key("rope.dimension_count")) {
      std::optional<uint64_t> n = v.asUnsigned();
      const io::GgufValue *heads = f.find(key("attention.head_count"));
      const io::GgufValue *width = f.find(key("embedding_length"));
      const io::GgufValue *keyLength = f.find(key("attention.key_length"));
      std::optional<uint64_t> headDim =
          keyLength ? keyLength->asUnsigned()
          : heads && width && heads->asUnsigned() && *heads->asUnsigned()
              ? std::optional<uint64_t>(*width->asUnsigned() / *heads->asUnsigned())
              : std::nullopt;
      if (!n || !headDim || *n != *headDim)
        return fail(f, "metadata '" + k + "': rotary embedding of part of a head is not "
                       "supported (expected the head dimension)");
    }
  }
  if (f.tensor("rope_freqs.weight"))
    return fail(f, "tensor 'rope_freqs.weight': rope frequency factors are not supported yet");
  for (const char *id : {"bos_token_id", "eos_token_id"})
    if (const io::GgufValue *v = f.find(std::string("tokenizer.ggml.") + id))
      if (std::optional<uint64_t> n = v->asUnsigned())
        c[id] = int64_t(*n);
  c["tie_word_embeddings"] = f.tensor("output.weight") == nullptr;
  // The dtype of its 16-bit tensors (what unquantized weights compute in).
  std::string dtype = "float16";
  for (const io::GgufTensor &t : f.tensors)
    if (t.type == uint32_t(io::GgmlType::BF16))
      dtype = "bfloat16";
  c["torch_dtype"] = dtype;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(c));
  os.flush();
  return text;
}

llvm::Expected<ModelConfig> ggufModelConfig(const io::GgufFile &file) {
  llvm::Expected<std::string> json = ggufConfigJson(file);
  if (!json)
    return json.takeError();
  llvm::Expected<ModelConfig> config = parseModelConfig(*json, file.path);
  if (config)
    config->name = file.path;
  return config;
}

} // namespace weft

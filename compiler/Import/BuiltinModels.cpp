// Built-in model configurations: the published config.json fields of popular
// checkpoints (shapes only, no weights), parsed by the same code as a file.
#include "compiler/Import/ModelConfig.h"

#include "llvm/ADT/StringRef.h"

namespace weft {
namespace {

struct BuiltinModel {
  const char *name;
  const char *configJson;
};

#define LLAMA31_ROPE                                                           \
  R"("rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"
#define LLAMA32_ROPE                                                           \
  R"("rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"

const BuiltinModel kBuiltinModels[] = {
    {"llama-2-7b", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
      "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
      "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "float16",
      "bos_token_id": 1, "eos_token_id": 2})"},
    {"llama-3.1-8b", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, )" LLAMA31_ROPE R"(,
      "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})"},
    {"llama-3.1-70b", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
      "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, )" LLAMA31_ROPE R"(,
      "hidden_act": "silu", "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})"},
    {"llama-3.2-1b", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
      "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
      )" LLAMA32_ROPE R"(, "hidden_act": "silu", "tie_word_embeddings": true,
      "torch_dtype": "bfloat16", "bos_token_id": 128000,
      "eos_token_id": [128001, 128008, 128009]})"},
    {"llama-3.2-3b", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
      "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
      "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
      )" LLAMA32_ROPE R"(, "hidden_act": "silu", "tie_word_embeddings": true,
      "torch_dtype": "bfloat16", "bos_token_id": 128000,
      "eos_token_id": [128001, 128008, 128009]})"},
    {"mistral-7b", R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
      "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
      "vocab_size": 32768, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05,
      "rope_theta": 1000000.0, "sliding_window": null, "hidden_act": "silu",
      "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "bos_token_id": 1, "eos_token_id": 2})"},
    {"qwen2.5-1.5b", R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
      "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
      "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
      "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
      "sliding_window": 32768, "use_sliding_window": false, "hidden_act": "silu",
      "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "bos_token_id": 151643, "eos_token_id": 151643})"},
    {"qwen2.5-7b", R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
      "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
      "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
      "sliding_window": 131072, "use_sliding_window": false, "hidden_act": "silu",
      "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "bos_token_id": 151643, "eos_token_id": 151643})"},
    {"qwen2.5-14b", R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
      "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 48,
      "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
      "sliding_window": 131072, "use_sliding_window": false, "hidden_act": "silu",
      "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "bos_token_id": 151643, "eos_token_id": 151643})"},
    {"qwen2.5-32b", R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
      "hidden_size": 5120, "intermediate_size": 27648, "num_hidden_layers": 64,
      "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064,
      "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
      "sliding_window": 131072, "use_sliding_window": false, "hidden_act": "silu",
      "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "bos_token_id": 151643, "eos_token_id": 151643})"},
    {"qwen3-8b", R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
      "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
      "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
      "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0, "attention_bias": false, "sliding_window": null,
      "use_sliding_window": false, "hidden_act": "silu", "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645})"},
    {"qwen3-32b", R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
      "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
      "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
      "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0, "attention_bias": false, "sliding_window": null,
      "use_sliding_window": false, "hidden_act": "silu", "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645})"},
    {"gemma-2-9b", R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
      "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
      "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
      "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06,
      "rope_theta": 10000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
      "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
      "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
      "attention_bias": false, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "bos_token_id": 2, "eos_token_id": [1, 107], "pad_token_id": 0})"},
    {"gemma-2-27b", R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
      "hidden_size": 4608, "intermediate_size": 36864, "num_hidden_layers": 46,
      "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
      "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06,
      "rope_theta": 10000.0, "query_pre_attn_scalar": 144, "sliding_window": 4096,
      "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
      "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
      "attention_bias": false, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "bos_token_id": 2, "eos_token_id": [1, 107], "pad_token_id": 0})"},
};

} // namespace

std::vector<std::string> builtinModelNames() {
  std::vector<std::string> names;
  for (const BuiltinModel &m : kBuiltinModels)
    names.push_back(m.name);
  return names;
}

llvm::Expected<ModelConfig> getBuiltinModel(llvm::StringRef name) {
  for (const BuiltinModel &m : kBuiltinModels) {
    if (name != m.name)
      continue;
    llvm::Expected<ModelConfig> c =
        parseModelConfig(m.configJson, ("builtin:" + name).str());
    if (c)
      c->name = m.name;
    return c;
  }
  std::string known;
  for (const BuiltinModel &m : kBuiltinModels)
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "builtin:%s: unknown built-in model (known: %s)",
                                 name.str().c_str(), known.c_str());
}

} // namespace weft

// Tests of config.json parsing: every supported field, the built-in models,
// and a one-line error naming file and field for each malformed input.
#include "compiler/Import/ModelConfig.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace weft {
namespace {

const char *kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "hidden_act": "silu",
  "rope_theta": 500000.0, "torch_dtype": "float16", "eos_token_id": [2, 3]})";

// Replaces the first occurrence of `from` in kTinyLlama by `to`.
std::string tinyLlamaWith(const std::string &from, const std::string &to) {
  std::string s = kTinyLlama;
  size_t pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

// Parses `json` expecting failure; returns the message.
std::string parseError(const std::string &json) {
  llvm::Expected<ModelConfig> c = parseModelConfig(json, "dir/config.json");
  if (c) {
    ADD_FAILURE() << "expected an error for: " << json;
    return "";
  }
  std::string msg = llvm::toString(c.takeError());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind("dir/config.json: ", 0), 0u) << msg;
  return msg;
}

TEST(ModelConfigTest, ParsesTinyLlama) {
  llvm::Expected<ModelConfig> c = parseModelConfig(kTinyLlama, "config.json");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->family, ModelFamily::Llama);
  EXPECT_EQ(c->hiddenSize, 64);
  EXPECT_EQ(c->numKvHeads, 2);
  EXPECT_EQ(c->headDim, 16);
  EXPECT_EQ(c->dtype, io::DType::F16);
  EXPECT_EQ(c->rope.type, RopeType::Default);
  EXPECT_DOUBLE_EQ(c->ropeTheta, 500000.0);
  EXPECT_EQ(c->eosTokenIds, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(c->qkvBias);
  EXPECT_FALSE(c->tieWordEmbeddings);
}

TEST(ModelConfigTest, DefaultsKvHeadsToHeads) {
  llvm::Expected<ModelConfig> c = parseModelConfig(
      tinyLlamaWith("\"num_key_value_heads\": 2, ", ""), "config.json");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->numKvHeads, 4);
}

TEST(ModelConfigTest, ParsesLlama3RopeScalingInBothSpellings) {
  // transformers < 5: rope_scaling; legacy key "type".
  llvm::Expected<ModelConfig> a = parseModelConfig(
      tinyLlamaWith("\"rope_theta\": 500000.0",
                    "\"rope_theta\": 500000.0, \"rope_scaling\": {\"type\": \"llama3\", "
                    "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                    "\"original_max_position_embeddings\": 8192}"),
      "config.json");
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  EXPECT_EQ(a->rope.type, RopeType::Llama3);
  EXPECT_DOUBLE_EQ(a->rope.factor, 8.0);
  EXPECT_EQ(a->rope.originalMaxPositionEmbeddings, 8192);
  // transformers 5: rope_parameters holds theta and scaling.
  llvm::Expected<ModelConfig> b = parseModelConfig(
      tinyLlamaWith("\"rope_theta\": 500000.0",
                    "\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, "
                    "\"rope_theta\": 1000.0}"),
      "config.json");
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  EXPECT_EQ(b->rope.type, RopeType::Linear);
  EXPECT_DOUBLE_EQ(b->rope.factor, 2.0);
  EXPECT_DOUBLE_EQ(b->ropeTheta, 1000.0);
}

TEST(ModelConfigTest, Qwen2HasQkvBias) {
  std::string json = tinyLlamaWith("\"LlamaForCausalLM\"], \"model_type\": \"llama\"",
                                   "\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\"");
  llvm::Expected<ModelConfig> c = parseModelConfig(json, "config.json");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->family, ModelFamily::Qwen2);
  EXPECT_TRUE(c->qkvBias);
  EXPECT_FALSE(c->oBias);
}

TEST(ModelConfigTest, BuiltinModelsParse) {
  std::vector<std::string> names = builtinModelNames();
  for (const char *required : {"llama-3.1-8b", "llama-3.2-1b", "llama-3.1-70b",
                               "qwen2.5-7b", "qwen2.5-14b", "mistral-7b"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end())
        << required;
  for (const std::string &name : names) {
    llvm::Expected<ModelConfig> c = getBuiltinModel(name);
    ASSERT_TRUE(bool(c)) << name << ": " << llvm::toString(c.takeError());
    EXPECT_EQ(c->name, name);
  }
}

TEST(ModelConfigTest, BuiltinParameterCountsMatchPublishedSizes) {
  auto params = [](const char *name) {
    llvm::Expected<ModelConfig> c = getBuiltinModel(name);
    EXPECT_TRUE(bool(c));
    return c ? parameterCount(*c) : 0;
  };
  EXPECT_EQ(params("llama-3.1-8b"), 8030261248u);
  EXPECT_EQ(params("llama-3.2-1b"), 1235814400u);
  EXPECT_EQ(params("llama-3.1-70b"), 70553706496u);
  EXPECT_EQ(params("qwen2.5-7b"), 7615616512u);
  EXPECT_EQ(params("mistral-7b"), 7248023552u);
  EXPECT_EQ(params("qwen3-8b"), 8190735360u); // 8.19B, q/k norms included
  EXPECT_EQ(params("qwen3-32b"), 32762123264u);
  EXPECT_EQ(params("gemma-2-9b"), 9241705984u); // tied: the table counts once
  EXPECT_EQ(params("gemma-2-27b"), 27227128320u);
}

TEST(ModelConfigTest, Gemma2Fields) {
  llvm::Expected<ModelConfig> c = getBuiltinModel("gemma-2-27b");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->family, ModelFamily::Gemma2);
  EXPECT_EQ(c->hiddenAct, Activation::GeluTanh);
  EXPECT_DOUBLE_EQ(c->normWeightOffset, 1.0);
  EXPECT_TRUE(c->scaleEmbedding);
  EXPECT_TRUE(c->tieWordEmbeddings);
  ASSERT_TRUE(c->attentionScale.has_value());
  EXPECT_DOUBLE_EQ(*c->attentionScale, 1.0 / 12.0); // query_pre_attn_scalar 144
  EXPECT_EQ(c->attentionSoftcap, 50.0);
  EXPECT_EQ(c->finalLogitSoftcap, 30.0);
  // transformers 4's pattern without layer_types: even layers slide.
  EXPECT_EQ(c->windowOf(0), 4096);
  EXPECT_EQ(c->windowOf(1), std::nullopt);
  EXPECT_EQ(c->windowOf(44), 4096);
}

TEST(ModelConfigTest, Gemma2Refusals) {
  std::string gemma = tinyLlamaWith("\"LlamaForCausalLM\"], \"model_type\": \"llama\"",
                                    "\"Gemma2ForCausalLM\"], \"model_type\": \"gemma2\"");
  // The tiny config says silu.
  EXPECT_NE(parseError(gemma).find("gelu_pytorch_tanh"), std::string::npos) << parseError(gemma);
  std::string gelu = gemma;
  gelu.replace(gelu.find("\"hidden_act\": \"silu\""), 20, "\"hidden_act\": \"gelu_pytorch_tanh\"");
  auto with = [&](const std::string &extra) {
    std::string j = gelu;
    j.insert(j.rfind('}'), ", " + extra);
    return j;
  };
  llvm::Expected<ModelConfig> ok = parseModelConfig(with("\"sliding_window\": 8"), "c.json");
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  EXPECT_NE(parseError(with("\"layer_types\": [\"full_attention\"]")).find("layer_types"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"layer_types\": [\"sliding_attention\", \"global\"]"))
                .find("entry 1"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attention_bias\": true")).find("attention_bias"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attn_logit_softcapping\": -1")).find("attn_logit_softcapping"),
            std::string::npos);
  // Sliding layers need a window.
  EXPECT_NE(parseError(gelu).find("sliding_window"), std::string::npos) << parseError(gelu);
  // And Llama refuses Gemma's activation.
  std::string llamaGelu = kTinyLlama;
  llamaGelu.replace(llamaGelu.find("\"hidden_act\": \"silu\""), 20,
                    "\"hidden_act\": \"gelu_pytorch_tanh\"");
  EXPECT_NE(parseError(llamaGelu).find("expected silu"), std::string::npos)
      << parseError(llamaGelu);
}

TEST(ModelConfigTest, Qwen3HasNoBiasesAndRefusesWindows) {
  std::string json = tinyLlamaWith("\"LlamaForCausalLM\"], \"model_type\": \"llama\"",
                                   "\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\"");
  llvm::Expected<ModelConfig> c = parseModelConfig(json, "config.json");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->family, ModelFamily::Qwen3);
  EXPECT_FALSE(c->qkvBias);
  std::string windowed = tinyLlamaWith("\"LlamaForCausalLM\"], \"model_type\": \"llama\"",
                                       "\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
                                       "\"use_sliding_window\": true");
  std::string msg = parseError(windowed);
  EXPECT_NE(msg.find("use_sliding_window"), std::string::npos) << msg;
}

TEST(ModelConfigTest, UnknownBuiltinListsKnownNames) {
  llvm::Expected<ModelConfig> c = getBuiltinModel("gpt-5");
  ASSERT_FALSE(bool(c));
  std::string msg = llvm::toString(c.takeError());
  EXPECT_NE(msg.find("builtin:gpt-5: unknown built-in model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama-3.1-8b"), std::string::npos) << msg;
}

struct BadConfig {
  const char *what;
  std::string json;
  const char *expected; // substring of the message
};

// Keeps test names and failure output readable (gtest would hex-dump).
void PrintTo(const BadConfig &c, std::ostream *os) { *os << c.what; }

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, GivesOneLineError) {
  std::string msg = parseError(GetParam().json);
  EXPECT_NE(msg.find(GetParam().expected), std::string::npos)
      << GetParam().what << ": " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadConfigTest,
    ::testing::Values(
        BadConfig{"not json", "{\"architectures\": [", "invalid JSON"},
        BadConfig{"trailing garbage", std::string(kTinyLlama) + " x", "invalid JSON"},
        BadConfig{"invalid utf-8", tinyLlamaWith("\"llama\"", "\"ll\xff\xfe\""),
                  "invalid JSON"},
        BadConfig{"not an object", "[1, 2]", "expected a JSON object"},
        BadConfig{"no architectures",
                  tinyLlamaWith("\"architectures\": [\"LlamaForCausalLM\"], ", ""),
                  "field 'architectures': missing"},
        BadConfig{"architectures not a list",
                  tinyLlamaWith("[\"LlamaForCausalLM\"]", "\"LlamaForCausalLM\""),
                  "field 'architectures': expected a list of one architecture name"},
        BadConfig{"unsupported architecture",
                  tinyLlamaWith("LlamaForCausalLM", "GPT2LMHeadModel"),
                  "field 'architectures': unsupported architecture 'GPT2LMHeadModel'"},
        BadConfig{"model_type mismatch", tinyLlamaWith("\"llama\"", "\"qwen2\""),
                  "field 'model_type': 'qwen2' does not match LlamaForCausalLM"},
        BadConfig{"activation", tinyLlamaWith("\"silu\"", "\"gelu\""),
                  "field 'hidden_act': unsupported activation 'gelu'"},
        BadConfig{"missing hidden_size", tinyLlamaWith("\"hidden_size\": 64, ", ""),
                  "field 'hidden_size': missing"},
        BadConfig{"hidden_size is a string", tinyLlamaWith("64", "\"64\""),
                  "field 'hidden_size': expected an integer, got \"64\""},
        BadConfig{"hidden_size is fractional", tinyLlamaWith("64", "64.5"),
                  "field 'hidden_size': expected an integer"},
        BadConfig{"negative heads", tinyLlamaWith("\"num_attention_heads\": 4",
                                                  "\"num_attention_heads\": -4"),
                  "field 'num_attention_heads': expected an integer in [1, 4096], got -4"},
        BadConfig{"absurd vocab", tinyLlamaWith("256,", "99999999999,"),
                  "field 'vocab_size': expected an integer in"},
        BadConfig{"GQA ratio", tinyLlamaWith("\"num_key_value_heads\": 2",
                                             "\"num_key_value_heads\": 3"),
                  "field 'num_key_value_heads': 4 query heads are not a multiple of 3"},
        BadConfig{"indivisible hidden", tinyLlamaWith("\"num_attention_heads\": 4",
                                                      "\"num_attention_heads\": 6"),
                  "field 'num_attention_heads': hidden_size 64 is not divisible by 6"},
        BadConfig{"odd head_dim", tinyLlamaWith("\"vocab_size\"", "\"head_dim\": 15, \"vocab_size\""),
                  "field 'head_dim': expected an even head dimension"},
        BadConfig{"negative eps", tinyLlamaWith("1e-05", "-1e-05"),
                  "field 'rms_norm_eps': expected a positive number"},
        BadConfig{"rope_scaling type", tinyLlamaWith("\"rope_theta\": 500000.0",
                                                     "\"rope_scaling\": 8"),
                  "field 'rope_scaling': expected an object or null"},
        BadConfig{"rope yarn", tinyLlamaWith("\"rope_theta\": 500000.0",
                                             "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}"),
                  "field 'rope_scaling.rope_type': unsupported rope scaling 'yarn'"},
        BadConfig{"llama3 without factor",
                  tinyLlamaWith("\"rope_theta\": 500000.0",
                                "\"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1.0, "
                                "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192}"),
                  "field 'rope_scaling.factor': missing (required by rope_type 'llama3')"},
        BadConfig{"llama3 inverted factors",
                  tinyLlamaWith("\"rope_theta\": 500000.0",
                                "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, "
                                "\"high_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192}"),
                  "field 'rope_scaling.high_freq_factor': expected more than low_freq_factor"},
        BadConfig{"dtype", tinyLlamaWith("\"float16\"", "\"int8\""),
                  "field 'torch_dtype': unsupported dtype 'int8'"},
        BadConfig{"eos outside vocab", tinyLlamaWith("[2, 3]", "[2, 300]"),
                  "field 'eos_token_id': expected token ids in [0, 256)"},
        BadConfig{"tie not bool", tinyLlamaWith("\"hidden_act\"", "\"tie_word_embeddings\": 1, \"hidden_act\""),
                  "field 'tie_word_embeddings': expected true or false, got 1"},
        BadConfig{"pretraining_tp", tinyLlamaWith("\"hidden_act\"", "\"pretraining_tp\": 2, \"hidden_act\""),
                  "field 'pretraining_tp': expected 1, got 2"},
        BadConfig{"qwen2 sliding window",
                  tinyLlamaWith("\"LlamaForCausalLM\"], \"model_type\": \"llama\"",
                                "\"Qwen2ForCausalLM\"], \"use_sliding_window\": true, \"model_type\": \"qwen2\""),
                  "field 'use_sliding_window': Qwen2 sliding-window attention"}),
    [](const ::testing::TestParamInfo<BadConfig> &info) {
      std::string name;
      for (char c : std::string(info.param.what))
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

} // namespace
} // namespace weft

namespace weft {
namespace {

// The tiny Llama with a quantization_config (group 32 divides its 64- and
// 128-wide inputs).
std::string quantized(const std::string &quant) {
  return tinyLlamaWith("\"eos_token_id\": [2, 3]",
                       "\"eos_token_id\": [2, 3], \"quantization_config\": " + quant);
}

TEST(QuantizationTest, AwqCheckpointNeedsPackedProjections) {
  llvm::Expected<ModelConfig> c = parseModelConfig(
      quantized(R"({"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true,
                    "version": "GEMM", "modules_to_not_convert": ["down_proj"]})"),
      "config.json");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->quant.method, QuantMethod::Awq);
  EXPECT_EQ(c->quant.bits, 4);
  EXPECT_EQ(c->quant.groupSize, 32);
  EXPECT_EQ(c->quant.describe(), "AWQ 4-bit, group 32");
  std::map<std::string, ExpectedTensor> byName;
  for (const ExpectedTensor &t : expectedTensors(*c))
    byName[t.name] = t;
  // q_proj: 64 out (4 heads of 16) x 64 in, so qweight [in, out / 8].
  const ExpectedTensor &qw = byName["model.layers.0.self_attn.q_proj.qweight"];
  EXPECT_EQ(qw.shape, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(qw.dtype, io::DType::I32);
  EXPECT_EQ(byName["model.layers.0.self_attn.q_proj.qzeros"].shape,
            (std::vector<int64_t>{2, 8}));
  const ExpectedTensor &sc = byName["model.layers.0.mlp.gate_proj.scales"];
  EXPECT_EQ(sc.shape, (std::vector<int64_t>{2, 128}));
  EXPECT_EQ(sc.dtype, io::DType::F16);
  EXPECT_FALSE(byName.count("model.layers.0.self_attn.q_proj.weight"));
  // Not converted: the down projection, and never the embedding or norms.
  EXPECT_TRUE(byName.count("model.layers.1.mlp.down_proj.weight"));
  EXPECT_FALSE(byName.count("model.layers.1.mlp.down_proj.qweight"));
  EXPECT_FALSE(byName["model.embed_tokens.weight"].dtype.has_value());
  EXPECT_FALSE(byName["model.layers.0.input_layernorm.weight"].dtype.has_value());
  // The parameters are the model's, not the packed words.
  ModelConfig plain = *c;
  plain.quant = Quantization{};
  EXPECT_EQ(parameterCount(*c), parameterCount(plain));
  EXPECT_LT(checkpointBytes(*c), checkpointBytes(plain));
}

// compressed-tensors' ignore list takes module names and "re:" regular
// expressions over the module path.
TEST(QuantizationTest, CompressedTensorsIgnoreTakesNamesAndRegexes) {
  Quantization q;
  q.method = QuantMethod::CompressedTensors;
  q.bits = 4;
  q.unconverted = {"lm_head", "re:.*layers\\.1\\.mlp\\.down_proj$"};
  EXPECT_TRUE(q.quantizes("model.layers.0.mlp.down_proj.weight"));
  EXPECT_FALSE(q.quantizes("model.layers.1.mlp.down_proj.weight"));
  EXPECT_TRUE(q.quantizes("model.layers.11.mlp.down_proj.weight"));
  EXPECT_TRUE(q.quantizes("model.layers.1.mlp.up_proj.weight"));
}

TEST(QuantizationTest, GptqPacksAlongTheInput) {
  llvm::Expected<ModelConfig> c = parseModelConfig(
      quantized(R"({"quant_method": "gptq", "bits": 8, "group_size": -1, "sym": true,
                    "desc_act": false})"),
      "config.json");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->quant.describe(), "GPTQ 8-bit, one group per row, symmetric");
  std::map<std::string, ExpectedTensor> byName;
  for (const ExpectedTensor &t : expectedTensors(*c))
    byName[t.name] = t;
  // down_proj: 64 out x 128 in, 4 values a word along the input.
  EXPECT_EQ(byName["model.layers.0.mlp.down_proj.qweight"].shape,
            (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(byName["model.layers.0.mlp.down_proj.qzeros"].shape,
            (std::vector<int64_t>{1, 16}));
  EXPECT_EQ(byName["model.layers.0.mlp.down_proj.scales"].shape,
            (std::vector<int64_t>{1, 64}));
  EXPECT_EQ(byName["model.layers.0.mlp.down_proj.g_idx"].shape, (std::vector<int64_t>{128}));
}

INSTANTIATE_TEST_SUITE_P(
    Quantization, BadConfigTest,
    ::testing::Values(
        BadConfig{"not an object", quantized("4"),
                  "field 'quantization_config': expected an object, got 4"},
        BadConfig{"no method", quantized(R"({"bits": 4})"),
                  "field 'quantization_config.quant_method': missing"},
        BadConfig{"unknown method", quantized(R"({"quant_method": "bitsandbytes"})"),
                  "field 'quantization_config.quant_method': 'bitsandbytes' is not supported "
                  "(awq, gptq, compressed-tensors)"},
        BadConfig{"compressed tensors without a format",
                  quantized(R"({"quant_method": "compressed-tensors"})"),
                  "field 'quantization_config.format': missing (expected pack-quantized)"},
        BadConfig{"compressed tensors, two schemes",
                  quantized(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "config_groups": {"a": {}, "b": {}}})"),
                  "field 'quantization_config.config_groups': 2 schemes; one scheme for every "
                  "Linear layer is supported"},
        BadConfig{"compressed tensors, 2 bits",
                  quantized(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "config_groups": {"g": {"targets": ["Linear"], "weights":
                                  {"num_bits": 2, "strategy": "group", "group_size": 32}}}})"),
                  "field 'quantization_config.config_groups.g.weights.num_bits': 2 bits are not "
                  "supported (4 or 8)"},
        BadConfig{"compressed tensors, act-order",
                  quantized(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "config_groups": {"g": {"targets": ["Linear"], "weights":
                                  {"num_bits": 4, "strategy": "group", "group_size": 32,
                                   "actorder": "group"}}}})"),
                  "field 'quantization_config.config_groups.g.weights.actorder': act-order "
                  "(\"group\") is not supported: quantize with actorder null"},
        BadConfig{"compressed tensors, quantized KV cache",
                  quantized(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "config_groups": {"g": {"targets": ["Linear"], "weights":
                                  {"num_bits": 4, "strategy": "channel"}}},
                                "kv_cache_scheme": {"num_bits": 8, "type": "float"}})"),
                  "field 'quantization_config.kv_cache_scheme': a quantized KV cache is not "
                  "supported"},
        BadConfig{"compressed tensors, bad ignore regex",
                  quantized(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "config_groups": {"g": {"targets": ["Linear"], "weights":
                                  {"num_bits": 4, "strategy": "channel"}}},
                                "ignore": ["re:(lm_head"]})"),
                  "field 'quantization_config.ignore': 're:(lm_head' is not a valid regular "
                  "expression"},
        BadConfig{"gptq 3 bits",
                  quantized(R"({"quant_method": "gptq", "bits": 3, "group_size": 32})"),
                  "field 'quantization_config.bits': GPTQ with 3 bits is not supported (4 or 8)"},
        BadConfig{"act-order",
                  quantized(R"({"quant_method": "gptq", "bits": 4, "group_size": 32,
                                "desc_act": true})"),
                  "field 'quantization_config.desc_act': act-order (desc_act true) is not "
                  "supported"},
        BadConfig{"gptq v2 zeros",
                  quantized(R"({"quant_method": "gptq", "bits": 4, "group_size": 32,
                                "checkpoint_format": "gptq_v2"})"),
                  "field 'quantization_config.checkpoint_format': 'gptq_v2' is not supported"},
        BadConfig{"awq gemv packing",
                  quantized(R"({"quant_method": "awq", "bits": 4, "group_size": 32,
                                "version": "gemv"})"),
                  "field 'quantization_config.version': 'gemv': only the GEMM packing"},
        BadConfig{"awq 8 bits",
                  quantized(R"({"quant_method": "awq", "bits": 8, "group_size": 32})"),
                  "field 'quantization_config.bits': AWQ with 8 bits is not supported"},
        BadConfig{"awq without a group",
                  quantized(R"({"quant_method": "awq", "bits": 4})"),
                  "field 'quantization_config.group_size': missing"},
        BadConfig{"group does not divide",
                  quantized(R"({"quant_method": "awq", "bits": 4, "group_size": 48})"),
                  "field 'quantization_config.group_size': 48 does not divide the 64 inputs "
                  "of q_proj"},
        BadConfig{"bad module list",
                  quantized(R"({"quant_method": "awq", "bits": 4, "group_size": 32,
                                "modules_to_not_convert": "lm_head"})"),
                  "field 'quantization_config.modules_to_not_convert': expected a list"}));

} // namespace
} // namespace weft

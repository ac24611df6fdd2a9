// A GGUF file's metadata as a model config: SmolLM2-135M's keys give the
// config transformers reads from its config.json; what would change the
// model but is not read yet is refused, naming the key.
#include "compiler/Import/GgufConfig.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace weft {
namespace {

io::GgufValue u32(uint64_t v) {
  io::GgufValue x;
  x.type = io::GgufValueType::U32;
  x.u = v;
  return x;
}
io::GgufValue f32(double v) {
  io::GgufValue x;
  x.type = io::GgufValueType::F32;
  x.f = v;
  return x;
}
io::GgufValue str(const std::string &s) {
  io::GgufValue x;
  x.type = io::GgufValueType::String;
  x.s = s;
  return x;
}

// SmolLM2-135M-Instruct's metadata (from its GGUF file), tied embeddings.
io::GgufFile smollm2() {
  io::GgufFile f;
  f.path = "smollm2.gguf";
  f.metadata["general.architecture"] = str("llama");
  f.metadata["llama.block_count"] = u32(30);
  f.metadata["llama.embedding_length"] = u32(576);
  f.metadata["llama.feed_forward_length"] = u32(1536);
  f.metadata["llama.attention.head_count"] = u32(9);
  f.metadata["llama.attention.head_count_kv"] = u32(3);
  f.metadata["llama.attention.layer_norm_rms_epsilon"] = f32(1e-5);
  f.metadata["llama.rope.freq_base"] = f32(100000.0);
  f.metadata["llama.rope.dimension_count"] = u32(64);
  f.metadata["llama.context_length"] = u32(8192);
  f.metadata["llama.vocab_size"] = u32(49152);
  f.metadata["tokenizer.ggml.bos_token_id"] = u32(1);
  f.metadata["tokenizer.ggml.eos_token_id"] = u32(2);
  io::GgufTensor embd;
  embd.name = "token_embd.weight";
  embd.type = uint32_t(io::GgmlType::Q8_0);
  embd.dims = {576, 49152};
  f.tensors.push_back(embd);
  return f;
}

TEST(GgufConfigTest, SmolLM2MetadataIsItsConfig) {
  llvm::Expected<ModelConfig> c = ggufModelConfig(smollm2());
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->numLayers, 30);
  EXPECT_EQ(c->hiddenSize, 576);
  EXPECT_EQ(c->intermediateSize, 1536);
  EXPECT_EQ(c->numHeads, 9);
  EXPECT_EQ(c->numKvHeads, 3);
  EXPECT_EQ(c->headDim, 64);
  EXPECT_EQ(c->vocabSize, 49152);
  EXPECT_EQ(c->maxPositionEmbeddings, 8192);
  EXPECT_FLOAT_EQ(float(c->rmsNormEps), 1e-5f);
  EXPECT_EQ(c->ropeTheta, 100000.0);
  EXPECT_TRUE(c->tieWordEmbeddings);
  EXPECT_EQ(c->bosTokenId, 1);
  EXPECT_EQ(c->eosTokenIds, (std::vector<int64_t>{2}));
  EXPECT_EQ(c->name, "smollm2.gguf");
}

TEST(GgufConfigTest, WhatIsNotReadIsRefused) {
  auto refused = [](io::GgufFile f, const std::string &what) {
    llvm::Expected<ModelConfig> c = ggufModelConfig(f);
    ASSERT_FALSE(bool(c)) << what;
    std::string m = llvm::toString(c.takeError());
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  };
  io::GgufFile f = smollm2();
  f.metadata["general.architecture"] = str("gemma2");
  refused(f, "'gemma2' is not supported yet");
  f.metadata["general.architecture"] = str("falcon");
  refused(f, "smollm2.gguf: GGUF metadata 'general.architecture': 'falcon' is not supported");
  f = smollm2();
  f.metadata.erase("llama.block_count");
  refused(f, "metadata 'llama.block_count': missing");
  f = smollm2();
  f.metadata["llama.embedding_length"] = str("576");
  refused(f, "'llama.embedding_length': expected a non-negative integer, got a string");
  f = smollm2();
  f.metadata["llama.rope.scaling.type"] = str("linear");
  refused(f, "'llama.rope.scaling.type': rope scaling is not supported yet");
  f = smollm2();
  f.metadata["llama.attention.sliding_window"] = u32(4096);
  refused(f, "sliding-window attention is not supported yet");
  f = smollm2();
  f.metadata["llama.rope.dimension_count"] = u32(32);
  refused(f, "rotary embedding of part of a head is not supported");
  f = smollm2();
  io::GgufTensor freqs;
  freqs.name = "rope_freqs.weight";
  f.tensors.push_back(freqs);
  refused(f, "tensor 'rope_freqs.weight': rope frequency factors are not supported yet");
  // The family's own rules still apply: 9 heads do not share 4 KV heads.
  f = smollm2();
  f.metadata["llama.attention.head_count_kv"] = u32(4);
  refused(f, "num_key_value_heads");
}

} // namespace
} // namespace weft

// GGUF tensors as the Hugging Face checkpoint holds them: names, shapes,
// dequantized values, and Llama's Q/K rows permuted back (GGUF writers
// interleave each head's rotation pairs for llama.cpp).
#include "compiler/Import/GgufConfig.h"
#include "compiler/Import/GgufTensors.h"

#include "compiler/Import/Importer.h"
#include "compiler/Reference/FixtureRunner.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "runtime/io/MappedFile.h"
#include "runtime/tokenizer/GgufTokenizer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include "test/unit/RealFixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

namespace weft {
namespace {

TEST(GgufTensorsTest, NamesAndShapes) {
  EXPECT_EQ(huggingFaceName("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(huggingFaceName("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(huggingFaceName("output.weight"), "lm_head.weight");
  EXPECT_EQ(huggingFaceName("blk.12.attn_q.weight"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(huggingFaceName("blk.0.attn_k.bias"), "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(huggingFaceName("blk.3.attn_output.weight"), "model.layers.3.self_attn.o_proj.weight");
  EXPECT_EQ(huggingFaceName("blk.3.attn_k_norm.weight"), "model.layers.3.self_attn.k_norm.weight");
  EXPECT_EQ(huggingFaceName("blk.1.ffn_norm.weight"),
            "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(huggingFaceName("blk.1.ffn_down.weight"), "model.layers.1.mlp.down_proj.weight");
  for (const char *other : {"blk.x.attn_q.weight", "blk.01.attn_q.weight", "blk.1.attn_q",
                            "blk.1.ffn_gate_exps.weight", "rope_freqs.weight", "blk..ffn_up.weight"})
    EXPECT_FALSE(huggingFaceName(other).has_value()) << other;
  io::GgufTensor t;
  t.dims = {576, 1536};
  EXPECT_EQ(huggingFaceShape(t), (std::vector<int64_t>{1536, 576}));
}

TEST(GgufTensorsTest, QAndKRowsArePermutedBack) {
  // The writer's permutation, from the format: Hugging Face row
  // h * d + j * d/2 + i of a head of d rows becomes GGUF row h * d + 2i + j.
  const int64_t heads = 3, d = 8, cols = 2, rows = heads * d;
  std::vector<float> hf(size_t(rows * cols)), gguf(hf.size());
  for (size_t k = 0; k < hf.size(); ++k)
    hf[k] = float(k);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < d / 2; ++i)
        for (int64_t c = 0; c < cols; ++c)
          gguf[size_t((h * d + 2 * i + j) * cols + c)] =
              hf[size_t((h * d + j * (d / 2) + i) * cols + c)];
  std::vector<float> back = gguf;
  unpermuteRows(back, rows, cols, heads);
  EXPECT_EQ(back, hf);

  ModelConfig llama;
  llama.family = ModelFamily::Llama;
  llama.numHeads = 9;
  llama.numKvHeads = 3;
  EXPECT_EQ(permutedHeads(llama, "model.layers.0.self_attn.q_proj.weight"), 9);
  EXPECT_EQ(permutedHeads(llama, "model.layers.0.self_attn.k_proj.weight"), 3);
  EXPECT_EQ(permutedHeads(llama, "model.layers.0.self_attn.v_proj.weight"), 0);
  ModelConfig qwen2 = llama;
  qwen2.family = ModelFamily::Qwen2;
  EXPECT_EQ(permutedHeads(qwen2, "model.layers.0.self_attn.q_proj.weight"), 0);
}

// A one-tensor file in memory: a Q8_0 K projection of 2 heads of 4 rows,
// 32 inputs, d = 1 and row r's values r * 32 + c - 64 (clamped to int8).
TEST(GgufTensorsTest, ReadsDequantizedAndPermutedBack) {
  io::GgufFile f;
  f.path = "k.gguf";
  io::GgufTensor t;
  t.name = "blk.0.attn_k.weight";
  t.type = uint32_t(io::GgmlType::Q8_0);
  t.dims = {32, 8};
  t.offset = 0;
  t.bytes = 8 * 34;
  f.tensors.push_back(t);
  std::string bytes(size_t(t.bytes), '\0');
  for (int r = 0; r < 8; ++r) {
    uint16_t one = 0x3C00;
    std::memcpy(&bytes[size_t(r * 34)], &one, 2);
    for (int c = 0; c < 32; ++c)
      bytes[size_t(r * 34 + 2 + c)] = char(int8_t(r * 10 + c - 64));
  }
  ModelConfig c;
  c.family = ModelFamily::Llama;
  c.numHeads = 4;
  c.numKvHeads = 2;
  llvm::Expected<std::vector<float>> v = readAsHuggingFace(f, bytes, f.tensors[0], c);
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  ASSERT_EQ(v->size(), 256u);
  // Hugging Face row 1 of head 0 (j = 0, i = 1) is GGUF row 2; row 2
  // (j = 1, i = 0) is GGUF row 1; head 1 likewise from row 4.
  EXPECT_EQ((*v)[0 * 32], -64.0f);
  EXPECT_EQ((*v)[1 * 32], 2 * 10 - 64.0f);
  EXPECT_EQ((*v)[2 * 32], 1 * 10 - 64.0f);
  EXPECT_EQ((*v)[5 * 32 + 3], 6 * 10 + 3 - 64.0f);
  // Bytes that do not hold the tensor: refused.
  llvm::Expected<std::vector<float>> cut =
      readAsHuggingFace(f, std::string_view(bytes).substr(0, 100), f.tensors[0], c);
  ASSERT_FALSE(bool(cut));
  EXPECT_NE(llvm::toString(cut.takeError()).find("lies past the bytes given"), std::string::npos);
}

// SmolLM2-135M-Instruct's real file (test/unit/RealFixtures.h: fetched by
// scripts/test.sh, or WEFT_SMOLLM2_GGUF), read once for these tests.
class SmolLM2Test : public ::testing::Test {
protected:
  void SetUp() override {
    path = weft::testing::smolLM2Gguf();
    if (path.empty())
      GTEST_SKIP() << "no SmolLM2 GGUF: scripts/fetch_fixtures.py BUILD_DIR, or "
                      "WEFT_SMOLLM2_GGUF";
    StatusOr<io::GgufFile> f = io::readGguf(path);
    ASSERT_TRUE(f.isOk()) << f.status().message();
    file = std::move(*f);
    llvm::Expected<ModelConfig> c = ggufModelConfig(file);
    ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
    config = std::move(*c);
    StatusOr<io::MappedFile> m = io::MappedFile::open(path);
    ASSERT_TRUE(m.isOk());
    mapped.emplace(std::move(*m));
  }
  std::string path;
  io::GgufFile file;
  ModelConfig config;
  std::optional<io::MappedFile> mapped;
};

TEST_F(SmolLM2Test, ConfigAndEveryTensor) {
  EXPECT_EQ(config.numLayers, 30);
  EXPECT_EQ(config.headDim, 64);
  EXPECT_TRUE(config.tieWordEmbeddings);
  llvm::Error e = checkGgufTensors(file, config);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  llvm::Expected<std::vector<float>> q =
      readAsHuggingFace(file, mapped->bytes(), *file.tensor("blk.0.attn_q.weight"), config);
  ASSERT_TRUE(bool(q)) << llvm::toString(q.takeError());
  EXPECT_EQ(q->size(), 576u * 576u);
}

// The reference interpreter on the model read from the file continues a
// prompt as transformers does loading the same file: transformers 5
// (from_pretrained with gguf_file, f32, greedy generate) gave these 8
// tokens for this prompt on 2026-12-08.
TEST_F(SmolLM2Test, GreedyMatchesTransformers) {
  ModelConfig c = config;
  c.dtype = io::DType::F32; // the interpreter computes in f32, as transformers did
  reference::WeightStore weights;
  for (const io::GgufTensor &t : file.tensors) {
    std::optional<std::string> hf = huggingFaceName(t.name);
    ASSERT_TRUE(hf.has_value()) << t.name;
    llvm::Expected<std::vector<float>> v = readAsHuggingFace(file, mapped->bytes(), t, c);
    ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
    weights.add(*hf, reference::Tensor::floats(huggingFaceShape(t), std::move(*v)));
  }
  mlir::MLIRContext context;
  context.loadDialect<WeftDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, c);
  ASSERT_TRUE(module);
  llvm::Expected<std::vector<int32_t>> greedy =
      reference::runGreedy(*module, weights, {1, 504, 3458, 282, 4649, 314}, 8);
  ASSERT_TRUE(bool(greedy)) << llvm::toString(greedy.takeError());
  EXPECT_EQ(*greedy, (std::vector<int32_t>{253, 14840, 3102, 281, 260, 905, 282, 15879}));
}

// The file's tokenizer encodes as transformers' tokenizer of the same file
// (AutoTokenizer.from_pretrained with gguf_file, add_special_tokens=False;
// measured 2026-12-08): digits one by one, spaces, tabs and newlines,
// accents and CJK as bytes, the chat template's special tokens whole.
TEST_F(SmolLM2Test, TokenizerMatchesTransformers) {
  StatusOr<tokenizer::Tokenizer> tok = tokenizer::ggufTokenizer(file);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  const std::pair<const char *, std::vector<int32_t>> cases[] = {
      {"Hello world!", {19556, 905, 17}},
      {"The year 2024 had 366 days.", {504, 713, 216, 34, 32, 34, 36, 761, 216, 35, 38, 38, 2009, 30}},
      {"  spaces   and\ttabs\n", {216, 5600, 256, 284, 197, 100, 7366, 198}},
      {"na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
       {3546, 46494, 37366, 17097, 241, 115, 40993, 179, 120, 248}},
      {"<|im_start|>user\nhi<|im_end|>", {1, 4093, 198, 6004, 2}},
  };
  for (const auto &[text, ids] : cases) {
    StatusOr<std::vector<int32_t>> got = tok->encode(text, /*addSpecial=*/false);
    ASSERT_TRUE(got.isOk()) << got.status().message();
    EXPECT_EQ(*got, ids) << text;
    EXPECT_EQ(tok->decode(*got, /*skipSpecial=*/false), text);
  }
}

// And on 1,000 lines of text (test/fixtures/gguf/smollm2_tokens.json: the
// lines of docs/*.md with transformers' ids for each, written 2026-12-08).
TEST_F(SmolLM2Test, TokenizerMatchesTransformersOnAThousandLines) {
  StatusOr<tokenizer::Tokenizer> tok = tokenizer::ggufTokenizer(file);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  std::ifstream in(std::string(WEFT_FIXTURES_DIR) + "/gguf/smollm2_tokens.json");
  ASSERT_TRUE(in);
  nlohmann::json all = nlohmann::json::parse(in);
  int compared = 0, tokens = 0;
  for (const nlohmann::json &c : all["cases"]) {
    std::string text = c["text"];
    std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    StatusOr<std::vector<int32_t>> got = tok->encode(text, /*addSpecial=*/false);
    ASSERT_TRUE(got.isOk()) << got.status().message();
    EXPECT_EQ(*got, ids) << text;
    ++compared;
    tokens += int(ids.size());
  }
  EXPECT_EQ(compared, 1000);
  EXPECT_GT(tokens, 20000);
}

TEST(GgufTokenizerTest, WhatIsNotReadIsRefused) {
  io::GgufFile f;
  f.path = "t.gguf";
  io::GgufValue model;
  model.type = io::GgufValueType::String;
  model.s = "llama";
  f.metadata["tokenizer.ggml.model"] = model;
  StatusOr<std::string> j = tokenizer::ggufTokenizerJson(f);
  ASSERT_FALSE(j.isOk());
  EXPECT_NE(j.status().message().find("t.gguf: GGUF metadata 'tokenizer.ggml.model': 'llama' "
                                      "is not supported yet"),
            std::string::npos)
      << j.status().message();
  f.metadata["tokenizer.ggml.model"].s = "gpt2";
  io::GgufValue pre = model;
  pre.s = "qwen2";
  f.metadata["tokenizer.ggml.pre"] = pre;
  j = tokenizer::ggufTokenizerJson(f);
  ASSERT_FALSE(j.isOk());
  EXPECT_NE(j.status().message().find("'tokenizer.ggml.pre': 'qwen2' is not supported yet"),
            std::string::npos);
  f.metadata["tokenizer.ggml.pre"].s = "gpt-2";
  j = tokenizer::ggufTokenizerJson(f);
  ASSERT_FALSE(j.isOk());
  EXPECT_NE(j.status().message().find("'tokenizer.ggml.tokens': missing"), std::string::npos);
}

} // namespace
} // namespace weft

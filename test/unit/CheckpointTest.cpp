// Tests of checkpoint import: every committed Hugging Face fixture opens,
// and each kind of broken checkpoint gives a one-line error naming the file
// and the tensor.
#include "compiler/Import/Checkpoint.h"
#include "test/unit/TestFiles.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace weft {
namespace {

namespace fs = std::filesystem;
using testing::FakeTensor;
using testing::TempDir;

const std::string kFixtures = WEFT_FIXTURES_DIR;

std::string openError(const std::string &dir) {
  llvm::Expected<ModelSource> src = loadModelSource(dir);
  if (src) {
    ADD_FAILURE() << "expected an error for " << dir;
    return "";
  }
  std::string msg = llvm::toString(src.takeError());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  return msg;
}

TEST(CheckpointTest, EveryFixtureImports) {
  struct Expect {
    const char *name;
    io::DType dtype;
    bool sharded;
    ModelFamily family;
  } cases[] = {
      {"llama", io::DType::F32, false, ModelFamily::Llama},
      {"llama_tied_bf16", io::DType::BF16, false, ModelFamily::Llama},
      {"mistral", io::DType::F16, false, ModelFamily::Mistral},
      {"qwen2", io::DType::BF16, false, ModelFamily::Qwen2},
      {"llama_sharded", io::DType::F16, true, ModelFamily::Llama},
      {"qwen3", io::DType::BF16, false, ModelFamily::Qwen3},
      {"gemma2", io::DType::F32, false, ModelFamily::Gemma2},
  };
  for (const Expect &e : cases) {
    llvm::Expected<ModelSource> src = loadModelSource(kFixtures + "/" + e.name);
    ASSERT_TRUE(bool(src)) << e.name << ": " << llvm::toString(src.takeError());
    ASSERT_TRUE(src->checkpoint.has_value());
    EXPECT_EQ(src->config.dtype, e.dtype) << e.name;
    EXPECT_EQ(src->config.family, e.family) << e.name;
    EXPECT_EQ(src->checkpoint->sharded, e.sharded) << e.name;
    EXPECT_EQ(src->config.numLayers, 2) << e.name;
    EXPECT_EQ(src->checkpoint->unusedTensors, 0u) << e.name;
    if (e.sharded)
      EXPECT_GT(src->checkpoint->files.size(), 1u);
  }
}

TEST(CheckpointTest, FixtureFeatures) {
  llvm::Expected<ModelSource> llama = loadModelSource(kFixtures + "/llama");
  ASSERT_TRUE(bool(llama));
  EXPECT_EQ(llama->config.rope.type, RopeType::Llama3);
  EXPECT_EQ(llama->config.numKvHeads, 2);
  llvm::Expected<ModelSource> tied = loadModelSource(kFixtures + "/llama_tied_bf16");
  ASSERT_TRUE(bool(tied));
  EXPECT_TRUE(tied->config.tieWordEmbeddings);
  EXPECT_EQ(tied->config.headDim, 32);
  llvm::Expected<ModelSource> mistral = loadModelSource(kFixtures + "/mistral");
  ASSERT_TRUE(bool(mistral));
  EXPECT_EQ(mistral->config.slidingWindow, std::optional<int64_t>(5));
  llvm::Expected<ModelSource> qwen = loadModelSource(kFixtures + "/qwen2");
  ASSERT_TRUE(bool(qwen));
  EXPECT_TRUE(qwen->config.qkvBias);
  llvm::Expected<ModelSource> sharded = loadModelSource(kFixtures + "/llama_sharded");
  ASSERT_TRUE(bool(sharded));
  EXPECT_EQ(sharded->config.rope.type, RopeType::Linear);
}

// A copy of a fixture that a test may break.
class BrokenCheckpointTest : public ::testing::Test {
protected:
  std::string copyFixture(const std::string &name) {
    std::string dst = tmp.file(name);
    fs::copy(kFixtures + "/" + name, dst, fs::copy_options::recursive);
    return dst;
  }
  // Rewrites model.safetensors of `dir` with the tensors of `config` but
  // lets `edit` change the list first.
  void rewrite(const std::string &dir,
               const std::function<void(std::vector<FakeTensor> &)> &edit,
               const char *dtype = "F32") {
    llvm::Expected<ModelConfig> c = readModelConfig(dir + "/config.json");
    ASSERT_TRUE(bool(c));
    std::vector<FakeTensor> tensors;
    for (const ExpectedTensor &t : expectedTensors(*c))
      tensors.push_back({t.name, dtype, t.shape});
    edit(tensors);
    testing::writeSafetensors(dir + "/model.safetensors", tensors);
  }
  TempDir tmp;
};

TEST_F(BrokenCheckpointTest, MissingDirectory) {
  EXPECT_NE(openError(tmp.file("nope")).find("nope: not a checkpoint directory"),
            std::string::npos);
}

TEST_F(BrokenCheckpointTest, MissingConfig) {
  std::string dir = copyFixture("llama");
  fs::remove(dir + "/config.json");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("config.json: cannot open config.json"), std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, MalformedConfig) {
  std::string dir = copyFixture("llama");
  testing::writeFile(dir + "/config.json", "{\"architectures\": [\"LlamaForCausalLM\"],");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("config.json: invalid JSON"), std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, NoWeights) {
  std::string dir = copyFixture("llama");
  fs::remove(dir + "/model.safetensors");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("no model.safetensors or model.safetensors.index.json"),
            std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, MissingTensor) {
  std::string dir = copyFixture("llama");
  rewrite(dir, [](std::vector<FakeTensor> &t) {
    std::erase_if(t, [](const FakeTensor &x) {
      return x.name == "model.layers.1.mlp.up_proj.weight";
    });
  });
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("tensor 'model.layers.1.mlp.up_proj.weight' is missing "
                     "(expected shape [128, 64] for LlamaForCausalLM)"),
            std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, WrongShape) {
  std::string dir = copyFixture("llama");
  rewrite(dir, [](std::vector<FakeTensor> &t) {
    for (FakeTensor &x : t)
      if (x.name == "model.layers.0.self_attn.k_proj.weight")
        x.shape = {64, 64};
  });
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("model.safetensors: tensor 'model.layers.0.self_attn.k_proj.weight': "
                     "shape [64, 64] does not match config.json (expected [32, 64])"),
            std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, UnsupportedDType) {
  std::string dir = copyFixture("llama");
  rewrite(dir, [](std::vector<FakeTensor> &) {}, "I8");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("tensor 'model.embed_tokens.weight': dtype I8 is not supported"),
            std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, MixedDTypes) {
  std::string dir = copyFixture("llama");
  rewrite(dir, [](std::vector<FakeTensor> &t) {
    for (FakeTensor &x : t)
      if (x.name == "model.norm.weight")
        x.dtype = "F16";
  });
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("tensor 'model.norm.weight': dtype F16 differs from "
                     "'model.embed_tokens.weight' (F32)"),
            std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, TruncatedSafetensors) {
  std::string dir = copyFixture("llama");
  std::string bytes = testing::readFile(dir + "/model.safetensors");
  testing::writeFile(dir + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor '"), std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, ShardMissing) {
  std::string dir = copyFixture("llama_sharded");
  fs::remove(dir + "/model-00003-of-00007.safetensors");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("model-00003-of-00007.safetensors"), std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, IndexListsTensorMissingFromShard) {
  std::string dir = copyFixture("llama_sharded");
  std::string index = testing::readFile(dir + "/model.safetensors.index.json");
  size_t pos = index.find("\"weight_map\": {");
  ASSERT_NE(pos, std::string::npos);
  index.insert(pos + 15, "\"model.extra.weight\": \"model-00001-of-00007.safetensors\", ");
  testing::writeFile(dir + "/model.safetensors.index.json", index);
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("model-00001-of-00007.safetensors: tensor 'model.extra.weight' "
                     "listed in model.safetensors.index.json is missing"),
            std::string::npos) << msg;
}

TEST_F(BrokenCheckpointTest, MalformedIndex) {
  std::string dir = copyFixture("llama_sharded");
  testing::writeFile(dir + "/model.safetensors.index.json", "{\"weight_map\": 3}");
  std::string msg = openError(dir);
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weight_map"), std::string::npos) << msg;
}

} // namespace
} // namespace weft

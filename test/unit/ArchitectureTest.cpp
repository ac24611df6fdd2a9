// The registry of model families: every family is found by its name and
// model_type, and the tensors a config needs (recorded from the family's
// graph) are exactly the weights the imported graph reads, in order.
#include "compiler/Import/Architecture.h"
#include "compiler/Import/Importer.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <set>

namespace weft {
namespace {

TEST(ArchitectureTest, EveryFamilyIsRegisteredOnce) {
  std::set<std::string> names, types;
  for (const Architecture *a : architectures()) {
    EXPECT_TRUE(names.insert(a->name).second) << a->name;
    EXPECT_TRUE(types.insert(a->modelType).second) << a->modelType;
    EXPECT_EQ(findArchitecture(a->name), a);
    EXPECT_NE(supportedArchitectureNames().find(a->name), std::string::npos);
    ASSERT_NE(a->readFields, nullptr) << a->name;
    ASSERT_NE(a->layer, nullptr) << a->name;
  }
  EXPECT_EQ(findArchitecture("GPT2LMHeadModel"), nullptr);
  // A config built in code (no architecture name) takes its family's.
  ModelConfig c;
  c.family = ModelFamily::Qwen2;
  EXPECT_EQ(&architectureOf(c), &qwen2Architecture());
}

TEST(ArchitectureTest, ExpectedTensorsAreTheGraphsWeights) {
  mlir::MLIRContext context;
  for (const std::string &name : builtinModelNames()) {
    llvm::Expected<ModelConfig> c = getBuiltinModel(name);
    ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
    c->numLayers = 2; // the layers repeat
    mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, *c);
    std::vector<std::string> read;
    module->walk([&](WeightOp w) {
      std::string n = w.getName().str();
      if (std::find(read.begin(), read.end(), n) == read.end())
        read.push_back(n);
    });
    std::vector<std::string> expected;
    for (const ExpectedTensor &t : expectedTensors(*c))
      expected.push_back(t.name);
    EXPECT_EQ(read, expected) << name;
  }
}

// Qwen3 adds one q_norm and one k_norm of head_dim per layer to the Llama
// layer, and its queries (64 heads of 128) are wider than the hidden size.
TEST(ArchitectureTest, Qwen3HasHeadNorms) {
  llvm::Expected<ModelConfig> c = getBuiltinModel("qwen3-32b");
  ASSERT_TRUE(bool(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(&architectureOf(*c), &qwen3Architecture());
  EXPECT_EQ(c->qWidth(), 8192);
  EXPECT_EQ(c->hiddenSize, 5120);
  EXPECT_FALSE(c->qkvBias);
  int norms = 0;
  for (const ExpectedTensor &t : expectedTensors(*c))
    if (llvm::StringRef(t.name).ends_with("self_attn.q_norm.weight") ||
        llvm::StringRef(t.name).ends_with("self_attn.k_norm.weight")) {
      EXPECT_EQ(t.shape, std::vector<int64_t>{128}) << t.name;
      ++norms;
    }
  EXPECT_EQ(norms, 2 * c->numLayers);
  mlir::MLIRContext context;
  c->numLayers = 1;
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, *c);
  int headNorms = 0;
  module->walk([&](HeadRmsNormOp op) {
    EXPECT_EQ(op.getHeadDim(), 128u);
    ++headNorms;
  });
  EXPECT_EQ(headNorms, 2);
}

} // namespace
} // namespace weft

// Quantized checkpoints in the reference interpreter: each projection of an
// AWQ or GPTQ twin of the llama fixture (packed by numpy,
// test/Inputs/make_quantized_fixture.py) decodes to exactly the F16 matrix
// numpy decoded, and the interpreter's logits and greedy tokens on the
// packed checkpoint equal those on the dequantized one.
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/Importer.h"
#include "compiler/Import/QuantizedWeights.h"
#include "compiler/Reference/FixtureRunner.h"
#include "compiler/Reference/Interpreter.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using reference::Tensor;
using reference::WeightStore;

const std::string kDir = WEFT_QUANTIZED_FIXTURES_DIR;

struct Loaded {
  ModelSource source;
  WeightStore weights;
};

Loaded load(const std::string &dir) {
  llvm::Expected<ModelSource> src = loadModelSource(dir);
  if (!src) {
    ADD_FAILURE() << llvm::toString(src.takeError());
    return {};
  }
  llvm::Expected<WeightStore> w = WeightStore::fromCheckpoint(*src->checkpoint);
  if (!w) {
    ADD_FAILURE() << llvm::toString(w.takeError());
    return {};
  }
  return {std::move(*src), std::move(*w)};
}

class QuantizedFixtureTest : public ::testing::TestWithParam<const char *> {};

TEST_P(QuantizedFixtureTest, DecodesAsNumpyAndRunsAsTheDequantizedModel) {
  Loaded packed = load(kDir + "/" + GetParam());
  Loaded plain = load(kDir + "/" + GetParam() + "-dequant");
  ASSERT_TRUE(packed.source.config.quant.active()) << GetParam();
  ASSERT_FALSE(plain.source.config.quant.active());

  // Every projection: the same f16 values, element for element.
  int projections = 0;
  for (const ExpectedTensor &t : graphWeights(packed.source.config)) {
    if (!packed.source.config.quant.quantizes(t.name))
      continue;
    ++projections;
    auto a = packed.weights.get(t.name);
    auto b = plain.weights.get(t.name);
    ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
    ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
    ASSERT_EQ((*a)->shape, (*b)->shape) << t.name;
    ASSERT_EQ((*a)->f, (*b)->f) << t.name;
  }
  EXPECT_EQ(projections, 2 * 7);

  // The whole model: identical logits and greedy tokens.
  mlir::MLIRContext context;
  std::vector<int32_t> prompt = {1, 17, 42, 99, 3, 250, 128, 7};
  mlir::OwningOpRef<mlir::ModuleOp> m1 = importModel(context, packed.source.config);
  mlir::OwningOpRef<mlir::ModuleOp> m2 = importModel(context, plain.source.config);
  auto l1 = reference::runPromptLogits(*m1, packed.weights, prompt);
  auto l2 = reference::runPromptLogits(*m2, plain.weights, prompt);
  ASSERT_TRUE(bool(l1)) << llvm::toString(l1.takeError());
  ASSERT_TRUE(bool(l2)) << llvm::toString(l2.takeError());
  EXPECT_EQ(*l1, *l2) << GetParam();
  auto g1 = reference::runGreedy(*m1, packed.weights, prompt, 8);
  auto g2 = reference::runGreedy(*m2, plain.weights, prompt, 8);
  ASSERT_TRUE(bool(g1)) << llvm::toString(g1.takeError());
  ASSERT_TRUE(bool(g2)) << llvm::toString(g2.takeError());
  EXPECT_EQ(*g1, *g2) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedFixtureTest,
                         ::testing::Values("awq", "gptq4", "gptq8"));

TEST(DequantizeTest, AwqNibbleOrderAndGptqZeros) {
  // One row of 8 outputs x 8 inputs, group 8: AWQ keeps column c of a word
  // at nibble (c % 2) * 4 + c / 2; code 9 at output 1 (nibble 4), zero 1.
  Quantization awq;
  awq.method = QuantMethod::Awq;
  awq.bits = 4;
  awq.groupSize = 8;
  std::vector<int32_t> qweight(8, 0), qzeros = {0x11111111};
  qweight[0] = int32_t(9u << 16); // input 0, nibble 4: output 1
  std::vector<float> scales(8, 0.5f);
  PackedProjection p{8, 8, qweight, qzeros, {}, scales};
  auto w = dequantizeProjection(awq, "awq", p);
  ASSERT_TRUE(bool(w)) << llvm::toString(w.takeError());
  EXPECT_EQ((*w)[1 * 8 + 0], (9 - 1) * 0.5f); // output 1, input 0
  EXPECT_EQ((*w)[0 * 8 + 0], -0.5f);          // output 0, input 0: code 0
  // GPTQ 8-bit: zeros stored minus one; g_idx must name a group.
  Quantization gptq;
  gptq.method = QuantMethod::Gptq;
  gptq.bits = 8;
  gptq.groupSize = 0;
  std::vector<int32_t> gw = {0x00000080, 0, 0, 0}, gz = {0x7f7f7f7f}, gi = {0, 0, 0, 0};
  std::vector<float> gs(4, 2.0f);
  PackedProjection q{4, 4, gw, gz, gi, gs};
  auto v = dequantizeProjection(gptq, "gptq", q);
  ASSERT_TRUE(bool(v)) << llvm::toString(v.takeError());
  EXPECT_EQ((*v)[0], 0.0f);       // code 128, zero 127 + 1
  EXPECT_EQ((*v)[1 * 4], -256.0f); // output 1, input 0: code 0
  gi[2] = 1;
  auto bad = dequantizeProjection(gptq, "model.layers.0.mlp.up_proj.weight", q);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "model.layers.0.mlp.up_proj.weight: g_idx[2] = 1 is not one of the 1 groups");
}

} // namespace
} // namespace weft

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
#include "dialects/Weft/IR/WeftOps.h"

#include "runtime/io/MappedFile.h"
#include "runtime/io/Safetensors.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FileSystem.h"

#include <cmath>
#include <cstring>

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

// The file the compiler writes beside a plan: every projection repacked
// into the kernels' layout, which expands to the same f16 values numpy
// decoded (the plain twin's weights).
TEST_P(QuantizedFixtureTest, KernelLayoutExpandsToTheSameWeights) {
  Loaded packed = load(kDir + "/" + GetParam());
  Loaded plain = load(kDir + "/" + GetParam() + "-dequant");
  const Quantization &q = packed.source.config.quant;
  std::vector<QuantizedWeightRef> refs;
  for (const ExpectedTensor &t : graphWeights(packed.source.config))
    if (q.quantizes(t.name))
      refs.push_back({t.name, t.shape[0], t.shape[1], q.bits,
                      q.groupSize ? q.groupSize : t.shape[1], QuantFormat::Int,
                      codesTileable(q.bits, QuantFormat::Int, t.shape[0], t.shape[1])});
  ASSERT_EQ(refs.size(), 14u);
  // 4-bit codes: the down projections (64 x 128) are stored tiled, the rest
  // (64 inputs) row by row, so both orders are read back below.
  EXPECT_EQ(llvm::count_if(refs, [](const QuantizedWeightRef &r) { return r.tiled; }),
            q.bits == 4 ? 2 : 0);
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("weft-kernel-weights", "safetensors", path));
  uint64_t lastDone = 0, lastTotal = 0;
  auto written = writeKernelWeights(*packed.source.checkpoint, refs, path,
                                    [&](uint64_t done, uint64_t total) {
                                      lastDone = done;
                                      lastTotal = total;
                                    });
  ASSERT_TRUE(bool(written)) << llvm::toString(written.takeError());
  EXPECT_EQ(lastDone, lastTotal);
  StatusOr<io::SafetensorsHeader> h = io::readSafetensorsHeader(std::string(path));
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_EQ(h->headerSize, written->headerSize);
  EXPECT_EQ(h->fileSize, written->fileSize);
  StatusOr<io::MappedFile> map = io::MappedFile::open(std::string(path));
  ASSERT_TRUE(map.isOk());
  for (const QuantizedWeightRef &r : refs) {
    const io::TensorInfo *codes = h->find(r.name + ".codes");
    const io::TensorInfo *scales = h->find(r.name + ".scales");
    ASSERT_TRUE(codes && scales) << r.name;
    KernelProjection k;
    k.out = r.out;
    k.in = r.in;
    k.bits = q.bits;
    k.group = q.groupSize ? q.groupSize : r.in;
    k.scaleType = scales->dtype; // the checkpoint's: BF16 for ct4-bf16
    EXPECT_EQ(scales->dtype, packed.source.config.quant.method == QuantMethod::CompressedTensors
                                 ? packed.source.config.dtype
                                 : io::DType::F16);
    const std::vector<int64_t> codeShape =
        r.tiled ? std::vector<int64_t>{r.out / 16, 16 * r.in * q.bits / 32}
                : std::vector<int64_t>{r.out, r.in * q.bits / 32};
    EXPECT_EQ(codes->shape, codeShape);
    EXPECT_EQ(scales->shape, (std::vector<int64_t>{r.out, 2 * r.in / k.group}));
    const char *data = map->bytes().data() + h->dataOffset();
    k.codes.resize(size_t(codes->numElements()));
    std::memcpy(k.codes.data(), data + codes->dataBegin, codes->numBytes());
    if (r.tiled)
      k.codes = untileCodes(k.codes, r.out, r.in, int(q.bits));
    k.scales.resize(size_t(scales->numElements()));
    std::memcpy(k.scales.data(), data + scales->dataBegin, scales->numBytes());
    auto want = plain.weights.get(r.name);
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    for (int64_t j = 0; j < r.out; ++j)
      for (int64_t i = 0; i < r.in; ++i)
        ASSERT_EQ(k.weight(j, i), (*want)->f[size_t(j * r.in + i)])
            << r.name << " [" << j << ", " << i << "]";
  }
  llvm::sys::fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedFixtureTest,
                         ::testing::Values("awq", "gptq4", "gptq8", "ct4", "ct8", "ct4-bf16"));

TEST(DequantizeTest, CompressedTensorsPackAlongTheInputWithAnOffset) {
  // 8 rows of 8 inputs, group 4, every value stored as 8 (zero) but row 1's
  // input 5, at nibble 5 as 8 + 3; scales [out, groups].
  Quantization ct;
  ct.method = QuantMethod::CompressedTensors;
  ct.bits = 4;
  ct.groupSize = 4;
  ct.zeroPoint = false;
  std::vector<int32_t> packed(8, int32_t(0x88888888u));
  packed[1] = int32_t(0x88b88888u);
  std::vector<float> scales(16, 1.0f);
  scales[1 * 2 + 1] = 0.25f; // row 1, group 1
  auto t = gptqFromCompressedTensors(ct, "ct", 8, 8, packed, scales);
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError());
  auto w = dequantizeProjection(ct, "ct", t->view());
  ASSERT_TRUE(bool(w)) << llvm::toString(w.takeError());
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ((*w)[size_t(i)], 0.0f) << "row 0, input " << i; // value 8: zero
  EXPECT_EQ((*w)[size_t(8 + 5)], 3 * 0.25f); // row 1, input 5, group 1
  EXPECT_EQ((*w)[size_t(8 + 4)], 0.0f);
  std::vector<float> short_(15, 1.0f);
  auto bad = gptqFromCompressedTensors(ct, "model.layers.0.mlp.up_proj.weight", 8, 8, packed,
                                       short_);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "model.layers.0.mlp.up_proj.weight: weight_packed of 8 words and weight_scale of 15 "
            "do not match 8 x 8, compressed-tensors 4-bit, group 4");
  auto odd = gptqFromCompressedTensors(ct, "odd", 2, 8, {packed.data(), 2}, {scales.data(), 4});
  EXPECT_FALSE(bool(odd)); // 2 rows: GPTQ's zeros pack 8 rows a word
  llvm::consumeError(odd.takeError());
}

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

// Quantizing at compile time (--weight-dtype int4 / int8 / fp8) from the
// F16 and the BF16 copy of the fixture: the C++ round to nearest gives
// exactly the values numpy's does (the rtn*-dequant and fp8*-dequant
// twins), and the interpreter runs the marked model as its twin (FP8: its
// twin holds the f32 products as an F32 model, so the logits agree to
// 16-bit rounding).
struct CompileTimeCase {
  const char *weightDType; // int4, int8, fp8
  const char *source;      // f16, bf16
};

class CompileTimeQuantizationTest : public ::testing::TestWithParam<CompileTimeCase> {
protected:
  std::string kind() const { return GetParam().weightDType; }
  bool fp8() const { return kind() == "fp8"; }
  int bits() const { return kind() == "int4" ? 4 : 8; }
  QuantFormat format() const { return fp8() ? QuantFormat::E4M3 : QuantFormat::Int; }
  // The numpy twin of this case: "rtn4-bf16-dequant", with `head` the one
  // whose LM head is quantized too ("rtn4-bf16-head-dequant").
  std::string twinName(bool head) const {
    return (fp8() ? std::string("fp8") : "rtn" + std::to_string(bits())) +
           (std::string(GetParam().source) == "bf16" ? "-bf16" : "") + (head ? "-head" : "") +
           "-dequant";
  }
  // The last prompt token's logits of `module` over `weights`.
  static std::vector<float> logits(mlir::ModuleOp module, const reference::WeightStore &weights) {
    const std::vector<int32_t> prompt = {1, 17, 42, 99, 3, 250, 128, 7};
    auto l = reference::runPromptLogits(module, weights, prompt);
    EXPECT_TRUE(bool(l)) << llvm::toString(l.takeError());
    return l ? *l : std::vector<float>();
  }
  // `got` as the twin's `want`: equal, or with FP8 (whose twin holds the
  // f32 products as an F32 model) within 16-bit rounding.
  void expectAsTwin(const std::vector<float> &got, const std::vector<float> &want) const {
    if (!fp8()) {
      EXPECT_EQ(got, want);
      return;
    }
    ASSERT_EQ(got.size(), want.size());
    float worst = 0.0f, largest = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]));
      largest = std::max(largest, std::fabs(want[i]));
    }
    EXPECT_LT(worst, 2e-2f * largest) << "largest logit " << largest;
  }
};

TEST_P(CompileTimeQuantizationTest, MatchesNumpyAndRunsAsTheTwin) {
  Loaded source = load(kDir + "/" + GetParam().source);
  Loaded twin = load(kDir + "/" + twinName(false));
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> marked = importModel(context, source.source.config);
  quantizeProjections(*marked, bits(), format());
  int projections = 0;
  marked->walk([&](WeightOp w) {
    QuantAttr q = w.getQuantAttr();
    if (!q)
      return;
    ++projections;
    EXPECT_EQ(q.getBits(), bits());
    EXPECT_EQ(q.getFormat(), format());
    int64_t in = w.getType().getDimSize(1);
    EXPECT_EQ(q.getGroup(), bits() == 4 && in % 128 == 0 ? 128 : in) << w.getName().str();
    auto got = source.weights.getQuantized(w.getName(), q, w.getType().getElementType());
    auto want = twin.weights.get(w.getName());
    ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
    ASSERT_TRUE(bool(want)) << llvm::toString(want.takeError());
    ASSERT_EQ((*got)->f, (*want)->f) << w.getName().str();
  });
  EXPECT_EQ(projections, 2 * 7);
  mlir::OwningOpRef<mlir::ModuleOp> plain = importModel(context, twin.source.config);
  expectAsTwin(logits(*marked, source.weights), logits(*plain, twin.weights));
}

// --lm-head-dtype: the head marked too, quantized as numpy's -head twin
// quantizes it, and the interpreter runs the marked model as that twin.
TEST_P(CompileTimeQuantizationTest, WithTheLmHeadRunsAsTheTwin) {
  Loaded source = load(kDir + "/" + GetParam().source);
  Loaded twin = load(kDir + "/" + twinName(true));
  Loaded headless = load(kDir + "/" + twinName(false));
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> marked = importModel(context, source.source.config);
  quantizeProjections(*marked, bits(), format());
  llvm::Error e = quantizeLmHead(*marked, bits(), format());
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  int heads = 0;
  marked->walk([&](LogitsOp l) {
    auto w = l.getWeight().getDefiningOp<WeightOp>();
    ASSERT_TRUE(w);
    EXPECT_EQ(w.getName(), "lm_head.weight");
    ASSERT_TRUE(w.getQuantAttr());
    EXPECT_EQ(w.getQuantAttr().getFormat(), format());
    EXPECT_EQ(w.getQuantAttr().getGroup(), w.getType().getDimSize(1)); // 64 inputs: one group
    ++heads;
  });
  EXPECT_EQ(heads, 1);
  std::vector<float> got = logits(*marked, source.weights);
  mlir::OwningOpRef<mlir::ModuleOp> plain = importModel(context, twin.source.config);
  expectAsTwin(got, logits(*plain, twin.weights));
  // Against the twin whose head stays 16-bit the logits move: the head is
  // really quantized.
  mlir::OwningOpRef<mlir::ModuleOp> plainHead = importModel(context, headless.source.config);
  EXPECT_NE(got, logits(*plainHead, headless.weights));
}

// A head tied to the embedding: the head becomes a quantized copy, the
// embedding keeps the 16-bit table.
TEST(LmHeadQuantizationTest, TiedHeadGetsAQuantizedCopy) {
  llvm::Expected<ModelConfig> builtin = getBuiltinModel("llama-3.2-1b");
  ASSERT_TRUE(bool(builtin)) << llvm::toString(builtin.takeError());
  const ModelConfig &config = *builtin;
  ASSERT_TRUE(config.tieWordEmbeddings);
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, config);
  llvm::Error e = quantizeLmHead(*module, 8);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  WeightOp head, table;
  module->walk([&](LogitsOp l) { head = l.getWeight().getDefiningOp<WeightOp>(); });
  module->walk([&](EmbeddingOp emb) { table = emb.getTable().getDefiningOp<WeightOp>(); });
  ASSERT_TRUE(head && table);
  EXPECT_NE(head, table);
  EXPECT_EQ(head.getName(), table.getName());
  ASSERT_TRUE(head.getQuantAttr());
  EXPECT_EQ(head.getQuantAttr().getBits(), 8);
  EXPECT_EQ(head.getQuantAttr().getGroup(), config.hiddenSize);
  EXPECT_FALSE(table.getQuantAttr());
  // Marking again leaves one quantized head.
  e = quantizeLmHead(*module, 8);
  ASSERT_FALSE(bool(e)) << llvm::toString(std::move(e));
  int quantized = 0;
  module->walk([&](WeightOp w) { quantized += w.getQuantAttr() && w.getName() == table.getName(); });
  EXPECT_EQ(quantized, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CompileTimeQuantizationTest,
    ::testing::Values(CompileTimeCase{"int4", "f16"}, CompileTimeCase{"int8", "f16"},
                      CompileTimeCase{"fp8", "f16"}, CompileTimeCase{"int4", "bf16"},
                      CompileTimeCase{"int8", "bf16"}, CompileTimeCase{"fp8", "bf16"}),
    [](const ::testing::TestParamInfo<CompileTimeCase> &info) {
      return std::string(info.param.weightDType) + "_" + info.param.source;
    });

TEST(KernelLayoutTest, E4M3RoundsToNearestEvenAndSaturates) {
  // Every finite byte is its own value's encoding.
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f)
      continue; // NaN
    const float v = e4m3Value(uint8_t(b));
    EXPECT_EQ(e4m3Bits(v), b == 0x80 ? 0x80 : b) << b << " = " << v;
  }
  EXPECT_EQ(e4m3Value(0x7e), 448.0f);
  EXPECT_EQ(e4m3Value(0x01), std::ldexp(1.0f, -9)); // the smallest subnormal
  EXPECT_EQ(e4m3Value(0x08), std::ldexp(1.0f, -6)); // the smallest normal
  EXPECT_EQ(e4m3Bits(1000.0f), 0x7e);               // saturates
  EXPECT_EQ(e4m3Bits(-1000.0f), 0xfe);
  EXPECT_EQ(e4m3Bits(1.0625f), e4m3Bits(1.0f));       // tie to even: 1.0
  EXPECT_EQ(e4m3Bits(1.1875f), e4m3Bits(1.25f));      // tie to even: 1.25
  EXPECT_EQ(e4m3Bits(std::ldexp(1.0f, -10)), 0x00);   // tie to even: 0
  EXPECT_EQ(e4m3Bits(std::ldexp(3.0f, -10)), 0x02);   // 1.5 units: 2
  EXPECT_TRUE(std::isnan(e4m3Value(e4m3Bits(std::nanf("")))));
  // Every f32 between two neighbouring codes and 1 ulp on either side of
  // their midpoint goes to the nearer one (the even code at the midpoint).
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = e4m3Value(uint8_t(b)), hi = e4m3Value(uint8_t(b + 1));
    const float mid = lo + (hi - lo) / 2; // exact: a few bits of mantissa
    const int even = b % 2 == 0 ? b : b + 1;
    EXPECT_EQ(e4m3Bits(mid), even) << mid;
    EXPECT_EQ(e4m3Bits(std::nextafter(mid, 0.0f)), b) << mid;
    EXPECT_EQ(e4m3Bits(std::nextafter(mid, 1e9f)), b + 1) << mid;
    EXPECT_EQ(e4m3Bits(-std::nextafter(mid, 1e9f)), 0x80 | (b + 1)) << mid;
  }
  EXPECT_EQ(e4m3Bits(std::nextafter(448.0f, 0.0f)), 0x7e);
  // Neighbours in order within a word, one conversion per pair.
  EXPECT_EQ(kernelCodeSlot(1, 8, QuantFormat::E4M3), 8);
  EXPECT_EQ(kernelCodeSlot(3, 8, QuantFormat::E4M3), 24);
}

TEST(KernelLayoutTest, Bfloat16BitsRoundAsApFloat) {
  uint32_t state = 777;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, 4);
    if (std::isnan(f))
      continue;
    llvm::APFloat a(f);
    bool lost = false;
    a.convert(llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven, &lost);
    ASSERT_EQ(bfloat16Bits(f), uint16_t(a.bitcastToAPInt().getZExtValue())) << f;
  }
}

TEST(KernelLayoutTest, HalfBitsRoundsAsApFloat) {
  auto reference = [](float v) {
    llvm::APFloat f(v);
    bool lost = false;
    f.convert(llvm::APFloat::IEEEhalf(), llvm::APFloat::rmNearestTiesToEven, &lost);
    return uint16_t(f.bitcastToAPInt().getZExtValue());
  };
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, 1e30f,
                               -1e30f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f,
                               2.98023259e-08f, 1e-9f, 0.1f, 1.0009765625f, 1.00048828125f};
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) { // every exponent an f16 can reach, and some beyond
    state = state * 1664525u + 1013904223u;
    uint32_t bits = (state & 0x807fffffu) | (((state >> 23) % 48u + 95u) << 23);
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  for (float v : values)
    ASSERT_EQ(halfBits(v), reference(v)) << v;
  EXPECT_EQ(halfBits(std::nanf("")) & 0x7e00u, 0x7e00u);
}

TEST(KernelLayoutTest, NeighbourCodesShareAMaskAndActOrderIsRefused) {
  // 4-bit: inputs 0..7 of a word at bits 0, 16, 4, 20, 8, 24, 12, 28, so
  // (word >> 4j) & 0x000F000F holds inputs 2j and 2j + 1; 8-bit likewise.
  EXPECT_EQ(kernelCodeSlot(0, 4), 0);
  EXPECT_EQ(kernelCodeSlot(1, 4), 16);
  EXPECT_EQ(kernelCodeSlot(2, 4), 4);
  EXPECT_EQ(kernelCodeSlot(7, 4), 28);
  EXPECT_EQ(kernelCodeSlot(1, 8), 16);
  EXPECT_EQ(kernelCodeSlot(2, 8), 8);
  EXPECT_EQ(kernelCodeSlot(3, 8), 24);
  // GPTQ 4-bit, 8 inputs x 8 outputs, group 4: code i + j at input i,
  // output j; zeros 3 (stored 2); scale 0.25.
  Quantization gptq;
  gptq.method = QuantMethod::Gptq;
  gptq.bits = 4;
  gptq.groupSize = 4;
  std::vector<int32_t> qweight(8, 0), qzeros(2, 0x22222222), gIdx = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      qweight[size_t(j)] |= int32_t(uint32_t((i + j) % 16) << (4 * i));
  std::vector<float> scales(16, 0.25f);
  PackedProjection p{8, 8, qweight, qzeros, gIdx, scales};
  auto k = repackForKernels(gptq, "w", p);
  ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
  ASSERT_EQ(k->codes.size(), 8u);
  EXPECT_EQ(k->codes[1] & 0xfu, 1u);          // output 1, input 0
  EXPECT_EQ((k->codes[1] >> 16) & 0xfu, 2u);  // output 1, input 1
  EXPECT_EQ(k->weight(1, 1), (2 - 3) * 0.25f);
  EXPECT_EQ(k->weight(7, 7), ((14 % 16) - 3) * 0.25f);
  // Act-order: g_idx that is not input / group.
  gIdx = {1, 0, 0, 0, 0, 1, 1, 1};
  auto bad = repackForKernels(gptq, "model.layers.3.mlp.down_proj.weight", p);
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "model.layers.3.mlp.down_proj.weight: g_idx[0] = 1, not 0: the input features are "
            "reordered (act-order), which the kernels do not support");
}

// Tiled codes: word w of row j of a 32 x 256 4-bit matrix (32 words a row,
// 16 per row and tile step) lands at tile j / 16, step w / 16, row j % 16
// of the tile, word w % 16; untileCodes inverts it.
TEST(TiledCodes, TilesOfSixteenRowsAndOneHundredTwentyEightInputs) {
  const int64_t out = 32, in = 256, words = in * 4 / 32;
  std::vector<uint32_t> rows(size_t(out * words));
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = uint32_t(i * 2654435761u);
  std::vector<uint32_t> tiles = tileCodes(rows, out, in, 4);
  ASSERT_EQ(tiles.size(), rows.size());
  for (int64_t j = 0; j < out; ++j)
    for (int64_t w = 0; w < words; ++w)
      ASSERT_EQ(tiles[size_t(((j / 16) * 2 + w / 16) * 256 + (j % 16) * 16 + w % 16)],
                rows[size_t(j * words + w)])
          << j << ", " << w;
  EXPECT_EQ(untileCodes(tiles, out, in, 4), rows);
  EXPECT_TRUE(codesTileable(4, QuantFormat::Int, 4096, 14336));
  EXPECT_FALSE(codesTileable(4, QuantFormat::Int, 4104, 4096));
  EXPECT_FALSE(codesTileable(4, QuantFormat::Int, 4096, 4160));
  EXPECT_FALSE(codesTileable(8, QuantFormat::Int, 4096, 4096));
}

} // namespace
} // namespace weft

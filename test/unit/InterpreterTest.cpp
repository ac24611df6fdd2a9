// Tests of the reference interpreter: every Hugging Face fixture's logits and
// greedy continuation, single ops on hand-computed values, and error cases.
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/Importer.h"
#include "compiler/Reference/FixtureRunner.h"
#include "compiler/Reference/Interpreter.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "runtime/io/MappedFile.h"
#include "test/unit/TestFiles.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

namespace weft::reference {
namespace {

const std::string kFixtures = WEFT_FIXTURES_DIR;

// The tolerance on logits against transformers: max |a - b| / max |b| over
// the whole [T x V] tensor (see maxRelativeError). Both sides compute in f32
// from the same rounded weights, so only summation order differs.
constexpr double kLogitsTolerance = 1e-4;

std::string errorText(llvm::Error e) {
  std::string msg = llvm::toString(std::move(e));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  return msg;
}

//===----------------------------------------------------------------------===//
// Every fixture against transformers
//===----------------------------------------------------------------------===//

class InterpreterFixtureTest : public ::testing::TestWithParam<const char *> {};

TEST_P(InterpreterFixtureTest, LogitsAndGreedyContinuationMatchHuggingFace) {
  std::string dir = kFixtures + "/" + GetParam();
  llvm::Expected<ModelSource> src = loadModelSource(dir);
  ASSERT_TRUE(bool(src)) << llvm::toString(src.takeError());
  ASSERT_TRUE(src->checkpoint.has_value());
  llvm::Expected<FixtureReference> ref = readFixtureReference(dir);
  ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
  ASSERT_EQ(ref->vocabSize, src->config.vocabSize);

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, src->config);
  llvm::Expected<WeightStore> weights = WeightStore::fromCheckpoint(*src->checkpoint);
  ASSERT_TRUE(bool(weights)) << llvm::toString(weights.takeError());
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(forward);

  // Prefill: the whole prompt at positions 0..T-1 of slot 0.
  Interpreter interpreter(*weights);
  const std::vector<int32_t> &prompt = ref->promptIds;
  int32_t numTokens = int32_t(prompt.size());
  llvm::Expected<std::vector<Tensor>> out = runTokens(interpreter, forward, prompt, 0);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  ASSERT_EQ(out->size(), 2u);
  const Tensor &logits = (*out)[0];
  ASSERT_EQ(logits.shape, (std::vector<int64_t>{numTokens, ref->vocabSize}));
  double err = maxRelativeError(logits.f, ref->logits);
  std::cout << "[ fixture  ] " << GetParam() << ": max relative logits error "
            << err << "\n";
  RecordProperty("max_relative_error", std::to_string(err));
  EXPECT_LE(err, kLogitsTolerance) << GetParam();
  EXPECT_EQ(interpreter.cache().size(),
            size_t(src->config.numLayers) * prompt.size());

  // Greedy decoding, one token at a time through the same cache.
  const Tensor &next = (*out)[1];
  ASSERT_EQ(next.shape, (std::vector<int64_t>{numTokens}));
  std::vector<int32_t> generated = {next.i.back()};
  while (generated.size() < ref->greedyContinuation.size()) {
    int32_t position = numTokens + int32_t(generated.size()) - 1;
    llvm::Expected<std::vector<Tensor>> step =
        runTokens(interpreter, forward, generated.back(), position);
    ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
    ASSERT_EQ((*step)[1].shape, (std::vector<int64_t>{1}));
    generated.push_back((*step)[1].i[0]);
  }
  EXPECT_EQ(generated, ref->greedyContinuation) << GetParam();

  // The helpers other tests use agree with the direct runs.
  llvm::Expected<std::vector<float>> helperLogits =
      runPromptLogits(*module, *weights, prompt);
  ASSERT_TRUE(bool(helperLogits)) << llvm::toString(helperLogits.takeError());
  EXPECT_EQ(*helperLogits, logits.f);
  llvm::Expected<std::vector<int32_t>> helperGreedy = runGreedy(
      *module, *weights, prompt, int(ref->greedyContinuation.size()));
  ASSERT_TRUE(bool(helperGreedy)) << llvm::toString(helperGreedy.takeError());
  EXPECT_EQ(*helperGreedy, ref->greedyContinuation);
}

INSTANTIATE_TEST_SUITE_P(InterpreterFixtures, InterpreterFixtureTest,
                         ::testing::Values("llama", "llama_tied_bf16", "mistral",
                                           "qwen2", "llama_sharded", "qwen3", "gemma2"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           return std::string(info.param);
                         });

// The sampling graph with temperature 0 (what runTokens passes) is greedy.
TEST(InterpreterFixtureTest, SamplingGraphAtTemperatureZeroIsGreedy) {
  std::string dir = kFixtures + "/qwen2";
  llvm::Expected<ModelSource> src = loadModelSource(dir);
  ASSERT_TRUE(bool(src)) << llvm::toString(src.takeError());
  llvm::Expected<FixtureReference> ref = readFixtureReference(dir);
  ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
  mlir::MLIRContext context;
  ImportOptions options;
  options.sampling = true;
  auto module = importModel(context, src->config, options);
  llvm::Expected<WeightStore> weights = WeightStore::fromCheckpoint(*src->checkpoint);
  ASSERT_TRUE(bool(weights)) << llvm::toString(weights.takeError());
  llvm::Expected<std::vector<int32_t>> tokens =
      runGreedy(*module, *weights, ref->promptIds, 8);
  ASSERT_TRUE(bool(tokens)) << llvm::toString(tokens.takeError());
  EXPECT_EQ(*tokens, ref->greedyContinuation);
}

TEST(ReferenceHelpersTest, MaxRelativeError) {
  EXPECT_EQ(maxRelativeError({1.0f, -4.0f}, {1.0f, -4.0f}), 0.0);
  EXPECT_DOUBLE_EQ(maxRelativeError({1.5f, -4.0f}, {1.0f, -4.0f}), 0.5 / 4.0);
  EXPECT_TRUE(std::isinf(maxRelativeError({1.0f}, {1.0f, 2.0f})));
  EXPECT_TRUE(std::isinf(maxRelativeError({NAN}, {1.0f})));
}

TEST(ReferenceHelpersTest, FixtureReferenceErrors) {
  testing::TempDir tmp;
  llvm::Expected<FixtureReference> missing = readFixtureReference(tmp.path());
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(errorText(missing.takeError()).find("reference.json"), std::string::npos);
  testing::writeFile(tmp.file("reference.json"),
                     "{\"prompt_ids\":[1,2],\"greedy_continuation\":[3],"
                     "\"logits\":[[0.5,1.0]]}");
  llvm::Expected<FixtureReference> short_ = readFixtureReference(tmp.path());
  ASSERT_FALSE(bool(short_));
  EXPECT_NE(errorText(short_.takeError()).find("one row per prompt token"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Single ops
//===----------------------------------------------------------------------===//

class InterpreterOpTest : public ::testing::Test {
protected:
  InterpreterOpTest() {
    context.loadDialect<WeftDialect, mlir::func::FuncDialect>();
  }

  // Parses (and verifies) a module; the test fails on bad IR.
  mlir::func::FuncOp parse(llvm::StringRef source, llvm::StringRef name = "f") {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    if (!module) {
      ADD_FAILURE() << "cannot parse:\n" << source.str();
      return {};
    }
    return module->lookupSymbol<mlir::func::FuncOp>(name);
  }

  std::vector<Tensor> run(mlir::func::FuncOp fn, std::vector<Tensor> args) {
    llvm::Expected<std::vector<Tensor>> out = interpreter.run(fn, std::move(args));
    if (!out) {
      ADD_FAILURE() << llvm::toString(out.takeError());
      return {};
    }
    return std::move(*out);
  }

  std::string runError(mlir::func::FuncOp fn, std::vector<Tensor> args) {
    llvm::Expected<std::vector<Tensor>> out = interpreter.run(fn, std::move(args));
    if (out) {
      ADD_FAILURE() << "expected an error";
      return "";
    }
    return errorText(out.takeError());
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  WeightStore weights;
  Interpreter interpreter{weights};
};

// Llama 3.1 scaling, written out per frequency band. With head_dim 16,
// theta 1e4 and original context 64 (low/high wavelengths 64 and 16), the
// wavelengths 2π·10000^(i/8) ≈ 6.3, 19.9, 62.8, 199, ... put frequency 0 in
// the unscaled band, 1 and 2 in the smoothed band, the rest in the /factor one.
TEST_F(InterpreterOpTest, RopeLlama3MatchesDirectFormula) {
  auto fn = parse(R"mlir(
    func.func @f(%x: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x32xf32> {
      %r = weft.rope %x, %pos {head_dim = 16 : i64, theta = 10000.0 : f64,
              rope_type = #weft.rope_kind<llama3>, factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
              high_freq_factor = 4.0 : f64, original_max_position_embeddings = 64 : i64}
          : (tensor<?x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
      return %r : tensor<?x32xf32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  const std::vector<int32_t> positions = {0, 1, 7, 100, 1000};
  const int64_t tokens = positions.size(), width = 32, dim = 16;
  std::vector<float> x(tokens * width);
  for (size_t j = 0; j < x.size(); ++j)
    x[j] = float(std::sin(0.37 * double(j) + 0.1));
  std::vector<Tensor> out =
      run(fn, {Tensor::floats({tokens, width}, x), Tensor::ints(positions)});
  ASSERT_EQ(out.size(), 1u);

  const double pi = 3.14159265358979323846;
  std::vector<double> inv(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    double base = 1.0 / std::pow(10000.0, double(2 * i) / double(dim));
    double wavelen = 2 * pi / base;
    if (i == 0) {
      ASSERT_LT(wavelen, 16.0);
      inv[i] = base;
    } else if (i <= 2) {
      ASSERT_TRUE(wavelen >= 16.0 && wavelen <= 64.0);
      double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
      inv[i] = (1 - smooth) * base / 8.0 + smooth * base;
    } else {
      ASSERT_GT(wavelen, 64.0);
      inv[i] = base / 8.0;
    }
  }
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < width / dim; ++h)
      for (int64_t i = 0; i < dim / 2; ++i) {
        double a = positions[t] * inv[i];
        double x1 = x[t * width + h * dim + i];
        double x2 = x[t * width + h * dim + i + dim / 2];
        EXPECT_NEAR(out[0].f[t * width + h * dim + i],
                    x1 * std::cos(a) - x2 * std::sin(a), 1e-5)
            << "t=" << t << " h=" << h << " i=" << i;
        EXPECT_NEAR(out[0].f[t * width + h * dim + i + dim / 2],
                    x2 * std::cos(a) + x1 * std::sin(a), 1e-5)
            << "t=" << t << " h=" << h << " i=" << i;
      }
}

TEST_F(InterpreterOpTest, RopeLinearDividesFrequencies) {
  auto fn = parse(R"mlir(
    func.func @f(%x: tensor<1x4xf32>, %pos: tensor<1xi32>) -> tensor<1x4xf32> {
      %r = weft.rope %x, %pos {head_dim = 4 : i64, theta = 100.0 : f64,
              rope_type = #weft.rope_kind<linear>, factor = 2.0 : f64}
          : (tensor<1x4xf32>, tensor<1xi32>) -> tensor<1x4xf32>
      return %r : tensor<1x4xf32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  // inv_freq = {1, 1/10} / 2; at position 3 the angles are 1.5 and 0.15.
  std::vector<Tensor> out = run(fn, {Tensor::floats({1, 4}, {1, 0, 0, 0}),
                                     Tensor::ints({3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].f[0], std::cos(1.5), 1e-6);
  EXPECT_NEAR(out[0].f[2], std::sin(1.5), 1e-6);
  EXPECT_NEAR(out[0].f[1], 0.0, 1e-6);
  EXPECT_NEAR(out[0].f[3], 0.0, 1e-6);
}

// Two query heads sharing one KV head (GQA), head_dim 2, window 2, scale 1.
// Keys k_p = [p, 1] and values v_p = [10p, 1]: query head 0 = [1, 0] scores
// each position by p; head 1 = [0, 1] scores them all alike (an average).
constexpr const char *kAttentionIR = R"mlir(
  func.func @f(%q: tensor<?x4xf32>, %k: tensor<?x2xf32>, %v: tensor<?x2xf32>,
               %pos: tensor<?xi32>, %slots: tensor<?xi32>,
               %cache: !weft.kv_cache<layers = 1, kv_heads = 1, head_dim = 2, dtype = f16>)
      -> tensor<?x4xf32> {
    weft.kv_write %k, %v, %pos, %slots, %cache {layer = 0 : i64}
        : tensor<?x2xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?xi32>,
          !weft.kv_cache<layers = 1, kv_heads = 1, head_dim = 2, dtype = f16>
    %a = weft.attention %q, %pos, %slots, %cache {layer = 0 : i64, num_heads = 2 : i64,
            num_kv_heads = 1 : i64, head_dim = 2 : i64, scale = 1.0 : f64,
            sliding_window = 2 : i64}
        : (tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32>,
           !weft.kv_cache<layers = 1, kv_heads = 1, head_dim = 2, dtype = f16>)
        -> tensor<?x4xf32>
    return %a : tensor<?x4xf32>
  }
)mlir";

std::vector<Tensor> attentionArgs(const std::vector<int32_t> &positions,
                                  const std::vector<int32_t> &slots) {
  int64_t n = positions.size();
  std::vector<float> q, k, v;
  for (int32_t p : positions) {
    q.insert(q.end(), {1, 0, 0, 1});
    k.insert(k.end(), {float(p), 1});
    v.insert(v.end(), {10.0f * p, 1});
  }
  return {Tensor::floats({n, 4}, q), Tensor::floats({n, 2}, k),
          Tensor::floats({n, 2}, v), Tensor::ints(positions), Tensor::ints(slots),
          Tensor()};
}

TEST_F(InterpreterOpTest, AttentionSlidingWindowAcrossPrefillAndDecode) {
  auto fn = parse(kAttentionIR);
  ASSERT_TRUE(fn);
  // Head 0 over positions a, b (a < b): softmax weights e^a, e^b on 10a, 10b.
  auto head0 = [](double a, double b) {
    return (10 * a * std::exp(a) + 10 * b * std::exp(b)) / (std::exp(a) + std::exp(b));
  };
  std::vector<Tensor> out = run(fn, attentionArgs({0, 1, 2, 3}, {0, 0, 0, 0}));
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> &a = out[0].f;
  // Token 0 sees only itself; token t > 0 sees t - 1 and t.
  EXPECT_NEAR(a[0], 0.0, 1e-5);
  EXPECT_NEAR(a[2], 0.0, 1e-5);
  for (int t = 1; t < 4; ++t) {
    EXPECT_NEAR(a[t * 4 + 0], head0(t - 1, t), 1e-4) << t;
    EXPECT_NEAR(a[t * 4 + 1], 1.0, 1e-6) << t;
    EXPECT_NEAR(a[t * 4 + 2], 10.0 * (2 * t - 1) / 2.0, 1e-4) << t; // the average
    EXPECT_NEAR(a[t * 4 + 3], 1.0, 1e-6) << t;
  }
  EXPECT_EQ(interpreter.cache().size(), 4u);

  // A decode step of slot 0 at position 4 sees the cached position 3; a new
  // slot 1 at position 0 sees only its own token.
  out = run(fn, attentionArgs({4, 0}, {0, 1}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0].f[0], head0(3, 4), 1e-4);
  EXPECT_NEAR(out[0].f[2], 35.0, 1e-4);
  EXPECT_NEAR(out[0].f[4], 0.0, 1e-6);
  EXPECT_NEAR(out[0].f[6], 0.0, 1e-6);
  EXPECT_EQ(interpreter.cache().size(), 6u);
}

TEST_F(InterpreterOpTest, AttentionWithoutCachedKeysIsAnError) {
  auto fn = parse(R"mlir(
    func.func @f(%q: tensor<?x2xf32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>,
                 %cache: !weft.kv_cache<layers = 1, kv_heads = 1, head_dim = 2, dtype = f32>)
        -> tensor<?x2xf32> {
      %a = weft.attention %q, %pos, %slots, %cache {layer = 0 : i64, num_heads = 1 : i64,
              num_kv_heads = 1 : i64, head_dim = 2 : i64, scale = 1.0 : f64}
          : (tensor<?x2xf32>, tensor<?xi32>, tensor<?xi32>,
             !weft.kv_cache<layers = 1, kv_heads = 1, head_dim = 2, dtype = f32>)
          -> tensor<?x2xf32>
      return %a : tensor<?x2xf32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {Tensor::floats({1, 2}), Tensor::ints({0}),
                                  Tensor::ints({0}), Tensor()});
  EXPECT_NE(msg.find("weft.attention: no keys in the cache"), std::string::npos) << msg;
}

constexpr const char *kSampleIR = R"mlir(
  func.func @f(%l: tensor<?x4xf32>, %temp: tensor<?xf32>, %k: tensor<?xi32>,
               %p: tensor<?xf32>, %u: tensor<?xf32>) -> tensor<?xi32> {
    %n = weft.sample %l, %temp, %k, %p, %u
        : (tensor<?x4xf32>, tensor<?xf32>, tensor<?xi32>, tensor<?xf32>, tensor<?xf32>)
        -> tensor<?xi32>
    return %n : tensor<?xi32>
  }
)mlir";

std::vector<Tensor> sampleArgs(std::vector<float> logits, std::vector<float> temp,
                               std::vector<int32_t> k, std::vector<float> p,
                               std::vector<float> u) {
  int64_t n = temp.size();
  return {Tensor::floats({n, 4}, std::move(logits)), Tensor::floats({n}, std::move(temp)),
          Tensor::ints(std::move(k)), Tensor::floats({n}, std::move(p)),
          Tensor::floats({n}, std::move(u))};
}

TEST_F(InterpreterOpTest, SampleGreedyCases) {
  auto fn = parse(kSampleIR);
  ASSERT_TRUE(fn);
  // Logits with a tie at ids 1 and 2: greedy picks the lower id. Row 0:
  // temperature 0; row 1: top_k = 1 at temperature 1 with u near 1.
  std::vector<float> row = {0.1f, 3.0f, 3.0f, -1.0f};
  std::vector<float> logits = row;
  logits.insert(logits.end(), row.begin(), row.end());
  std::vector<Tensor> out =
      run(fn, sampleArgs(logits, {0.0f, 1.0f}, {0, 1}, {1.0f, 1.0f}, {0.5f, 0.999f}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].i, (std::vector<int32_t>{1, 1}));
}

TEST_F(InterpreterOpTest, SampleTopPAndUniform) {
  auto fn = parse(kSampleIR);
  ASSERT_TRUE(fn);
  // Probabilities 0.5, 0.3, 0.2, 0 (the last as -inf). top_p 0.7 keeps ids
  // 0 and 1 (0.5 < 0.7 <= 0.8), renormalized to 0.625 and 0.375.
  std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.2f),
                            -std::numeric_limits<float>::infinity()};
  std::vector<float> logits;
  for (int r = 0; r < 4; ++r)
    logits.insert(logits.end(), row.begin(), row.end());
  std::vector<Tensor> out =
      run(fn, sampleArgs(logits, {1, 1, 1, 1}, {0, 0, 0, 2}, {0.7f, 0.7f, 1.0f, 1.0f},
                         {0.5f, 0.7f, 0.9f, 0.9f}));
  ASSERT_EQ(out.size(), 1u);
  // u = 0.5 < 0.625 -> 0; u = 0.7 -> 1; all kept, u = 0.9 > 0.8 -> 2;
  // top_k 2 renormalizes 0.5, 0.3 to 0.625, 0.375, so u = 0.9 -> 1.
  EXPECT_EQ(out[0].i, (std::vector<int32_t>{0, 1, 2, 1}));

  std::string msg = runError(fn, sampleArgs(row, {1}, {0}, {1}, {1.0f}));
  EXPECT_NE(msg.find("weft.sample: uniform of token 0 is 1"), std::string::npos) << msg;
}

TEST_F(InterpreterOpTest, ArgmaxTakesLowestIndexAmongTies) {
  auto fn = parse(R"mlir(
    func.func @f(%l: tensor<2x3xf32>) -> tensor<2xi32> {
      %n = weft.argmax %l : tensor<2x3xf32> -> tensor<2xi32>
      return %n : tensor<2xi32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::vector<Tensor> out = run(fn, {Tensor::floats({2, 3}, {1, 5, 5, -2, -3, -2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].i, (std::vector<int32_t>{1, 0}));
}

TEST_F(InterpreterOpTest, WeightConcatAndSplit) {
  weights.add("a", Tensor::floats({2, 2}, {1, 2, 3, 4}));
  weights.add("b", Tensor::floats({1, 2}, {5, 6}));
  weights.add("c", Tensor::floats({2, 1}, {7, 8}));
  auto fn = parse(R"mlir(
    func.func @f(%x: tensor<?x5xbf16>)
        -> (tensor<3x2xbf16>, tensor<2x3xbf16>, tensor<?x2xbf16>, tensor<?x3xbf16>) {
      %a = weft.weight "a" : tensor<2x2xbf16>
      %b = weft.weight "b" : tensor<1x2xbf16>
      %c = weft.weight "c" : tensor<2x1xbf16>
      %rows = weft.weight_concat %a, %b {axis = 0 : i64}
          : (tensor<2x2xbf16>, tensor<1x2xbf16>) -> tensor<3x2xbf16>
      %cols = weft.weight_concat %a, %c {axis = 1 : i64}
          : (tensor<2x2xbf16>, tensor<2x1xbf16>) -> tensor<2x3xbf16>
      %s:2 = weft.split %x {sizes = array<i64: 2, 3>}
          : tensor<?x5xbf16> -> (tensor<?x2xbf16>, tensor<?x3xbf16>)
      return %rows, %cols, %s#0, %s#1
          : tensor<3x2xbf16>, tensor<2x3xbf16>, tensor<?x2xbf16>, tensor<?x3xbf16>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::vector<Tensor> out =
      run(fn, {Tensor::floats({2, 5}, {0, 1, 2, 3, 4, 10, 11, 12, 13, 14})});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].f, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(out[1].f, (std::vector<float>{1, 2, 7, 3, 4, 8}));
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[2].f, (std::vector<float>{0, 1, 10, 11}));
  EXPECT_EQ(out[3].f, (std::vector<float>{2, 3, 4, 12, 13, 14}));
}

// The fused function must give bit-identical results to the unfused one: a
// fusion only groups ops. The second region also writes the cache.
TEST_F(InterpreterOpTest, FusionRunsItsBody) {
  weights.add("norm", Tensor::floats({4}, {1.0f, 0.5f, 2.0f, 1.5f}));
  weights.add("w", Tensor::floats({3, 4}, {1, 0, -1, 2, 0.5f, 0.5f, 0.5f, 0.5f,
                                           -2, 1, 0, 3}));
  const char *source = R"mlir(
    !cache = !weft.kv_cache<layers = 1, kv_heads = 1, head_dim = 2, dtype = f32>
    func.func @plain(%x: tensor<?x4xf32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>,
                     %cache: !cache) -> tensor<?x3xf32> {
      %wn = weft.weight "norm" : tensor<4xf32>
      %w = weft.weight "w" : tensor<3x4xf32>
      %n = weft.rms_norm %x, %wn {epsilon = 1.0e-05 : f64}
          : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
      %y = weft.linear %n, %w : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
      %s = weft.silu %y : tensor<?x3xf32>
      %m = weft.mul %s, %y : tensor<?x3xf32>
      %r = weft.add %m, %y : tensor<?x3xf32>
      return %r : tensor<?x3xf32>
    }
    func.func @fused(%x: tensor<?x4xf32>, %pos: tensor<?xi32>, %slots: tensor<?xi32>,
                     %cache: !cache) -> tensor<?x3xf32> {
      %wn = weft.weight "norm" : tensor<4xf32>
      %w = weft.weight "w" : tensor<3x4xf32>
      %y = weft.fusion "rms_norm_linear" (%x, %wn, %w)
          : (tensor<?x4xf32>, tensor<4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32> {
      ^bb0(%a: tensor<?x4xf32>, %b: tensor<4xf32>, %c: tensor<3x4xf32>):
        %n = weft.rms_norm %a, %b {epsilon = 1.0e-05 : f64}
            : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
        %l = weft.linear %n, %c : (tensor<?x4xf32>, tensor<3x4xf32>) -> tensor<?x3xf32>
        weft.yield %l : tensor<?x3xf32>
      }
      %r = weft.fusion "swiglu_residual" (%y, %pos, %slots, %cache)
          : (tensor<?x3xf32>, tensor<?xi32>, tensor<?xi32>, !cache) -> tensor<?x3xf32> {
      ^bb0(%a: tensor<?x3xf32>, %p: tensor<?xi32>, %sl: tensor<?xi32>, %c: !cache):
        %s = weft.silu %a : tensor<?x3xf32>
        %m = weft.mul %s, %a : tensor<?x3xf32>
        %k, %v = weft.split %m {sizes = array<i64: 2, 1>}
            : tensor<?x3xf32> -> (tensor<?x2xf32>, tensor<?x1xf32>)
        weft.kv_write %k, %k, %p, %sl, %c {layer = 0 : i64}
            : tensor<?x2xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?xi32>, !cache
        %r = weft.add %m, %a : tensor<?x3xf32>
        weft.yield %r : tensor<?x3xf32>
      }
      return %r : tensor<?x3xf32>
    }
  )mlir";
  auto plain = parse(source, "plain");
  ASSERT_TRUE(plain);
  auto fused = module->lookupSymbol<mlir::func::FuncOp>("fused");
  ASSERT_TRUE(fused);
  std::vector<float> x = {0.3f, -1.2f, 2.0f, 0.7f, 1.0f, 1.0f, -1.0f, 0.0f};
  auto args = [&] {
    std::vector<Tensor> a;
    a.push_back(Tensor::floats({2, 4}, x));
    a.push_back(Tensor::ints({0, 1}));
    a.push_back(Tensor::ints({0, 0}));
    a.push_back(Tensor());
    return a;
  };
  std::vector<Tensor> expected = run(plain, args());
  std::vector<Tensor> actual = run(fused, args());
  ASSERT_EQ(expected.size(), 1u);
  ASSERT_EQ(actual.size(), 1u);
  EXPECT_EQ(actual[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(actual[0].f, expected[0].f);
  EXPECT_EQ(interpreter.cache().size(), 2u);
  ASSERT_NE(interpreter.cache().find(0, 0, 1), nullptr);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(InterpreterOpTest, UnknownWeightNamesIt) {
  auto fn = parse(R"mlir(
    func.func @f() -> tensor<2x2xf16> {
      %w = weft.weight "model.layers.9.mlp.up_proj.weight" : tensor<2x2xf16>
      return %w : tensor<2x2xf16>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {});
  EXPECT_NE(msg.find("weight 'model.layers.9.mlp.up_proj.weight' is not in the "
                     "weight store"),
            std::string::npos) << msg;
}

TEST_F(InterpreterOpTest, WeightShapeMismatch) {
  weights.add("w", Tensor::floats({2, 3}));
  auto fn = parse(R"mlir(
    func.func @f() -> tensor<3x2xf32> {
      %w = weft.weight "w" : tensor<3x2xf32>
      return %w : tensor<3x2xf32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {});
  EXPECT_NE(msg.find("weight 'w' has shape 2x3"), std::string::npos) << msg;
}

constexpr const char *kEmbeddingIR = R"mlir(
  func.func @f(%ids: tensor<?xi32>) -> tensor<?x2xf32> {
    %t = weft.weight "table" : tensor<3x2xf32>
    %x = weft.embedding %t, %ids : (tensor<3x2xf32>, tensor<?xi32>) -> tensor<?x2xf32>
    return %x : tensor<?x2xf32>
  }
)mlir";

TEST_F(InterpreterOpTest, EmbeddingGathersRows) {
  weights.add("table", Tensor::floats({3, 2}, {0, 1, 10, 11, 20, 21}));
  auto fn = parse(kEmbeddingIR);
  ASSERT_TRUE(fn);
  std::vector<Tensor> out = run(fn, {Tensor::ints({2, 0, 2})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].f, (std::vector<float>{20, 21, 0, 1, 20, 21}));
}

TEST_F(InterpreterOpTest, EmbeddingIdOutOfRange) {
  weights.add("table", Tensor::floats({3, 2}));
  auto fn = parse(kEmbeddingIR);
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {Tensor::ints({1, 3})});
  EXPECT_NE(msg.find("weft.embedding: token id 3 (token 1) is outside the "
                     "vocabulary [0, 3)"),
            std::string::npos) << msg;
  msg = runError(fn, {Tensor::ints({-1})});
  EXPECT_NE(msg.find("token id -1"), std::string::npos) << msg;
}

TEST_F(InterpreterOpTest, StaticDimensionMismatch) {
  auto fn = parse(R"mlir(
    func.func @f(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
      %y = weft.add %x, %x : tensor<4x2xf32>
      return %y : tensor<4x2xf32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {Tensor::floats({3, 2})});
  EXPECT_NE(msg.find("@f argument 0 has shape 3x2 at run time but its type is "
                     "tensor<4x2xf32>"),
            std::string::npos) << msg;
  msg = runError(fn, {Tensor::ints({4, 2}, std::vector<int32_t>(8))});
  EXPECT_NE(msg.find("integer tensor at run time"), std::string::npos) << msg;
  msg = runError(fn, {});
  EXPECT_NE(msg.find("@f takes 1 arguments, 0 were given"), std::string::npos) << msg;
}

TEST_F(InterpreterOpTest, UnknownOpNamesIt) {
  context.allowUnregisteredDialects();
  auto fn = parse(R"mlir(
    func.func @f(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
      %y = "mystery.op"(%x) : (tensor<?x2xf32>) -> tensor<?x2xf32>
      return %y : tensor<?x2xf32>
    }
  )mlir");
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {Tensor::floats({1, 2})});
  EXPECT_NE(msg.find("unsupported op 'mystery.op'"), std::string::npos) << msg;
}

TEST_F(InterpreterOpTest, UnverifiedIRIsAnError) {
  // Parsed without verification: the split sizes do not add up to 5.
  mlir::ParserConfig config(&context, /*verifyAfterParse=*/false);
  module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @f(%x: tensor<?x5xf32>) -> tensor<?x2xf32> {
      %a, %b = weft.split %x {sizes = array<i64: 2, 2>}
          : tensor<?x5xf32> -> (tensor<?x2xf32>, tensor<?x2xf32>)
      return %a : tensor<?x2xf32>
    }
  )mlir", config);
  ASSERT_TRUE(module);
  auto fn = module->lookupSymbol<mlir::func::FuncOp>("f");
  ASSERT_TRUE(fn);
  std::string msg = runError(fn, {Tensor::floats({1, 5})});
  EXPECT_NE(msg.find("@f does not verify: 'weft.split' op sizes add up to 4"),
            std::string::npos) << msg;
}

//===----------------------------------------------------------------------===//
// Weight decoding and the store
//===----------------------------------------------------------------------===//

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(InterpreterWeightsTest, DecodeHalf) {
  const uint16_t half[] = {0x3c00, 0xc000, 0x0001, 0x03ff, 0x0400, 0x7bff,
                           0x8000, 0x7c00, 0xfc00, 0x7e00, 0x3555};
  float out[11];
  ASSERT_TRUE(io::decodeToFloat(io::DType::F16, half, 11, out).isOk());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));       // smallest subnormal
  EXPECT_EQ(out[3], 1023 * std::ldexp(1.0f, -24)); // largest subnormal
  EXPECT_EQ(out[4], std::ldexp(1.0f, -14));       // smallest normal
  EXPECT_EQ(out[5], 65504.0f);
  EXPECT_EQ(out[6], 0.0f);
  EXPECT_TRUE(std::signbit(out[6]));
  EXPECT_EQ(out[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[8], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[9]));
  EXPECT_EQ(out[10], 0x555 * std::ldexp(1.0f, -12)); // 0.333251953125
}

TEST(InterpreterWeightsTest, DecodeBfloat16AndF32) {
  const unsigned char bf16[] = {0x80, 0x3f, 0x49, 0xc0, 0x80, 0x7f, 0xc0, 0x7f};
  float out[4];
  ASSERT_TRUE(io::decodeToFloat(io::DType::BF16, bf16, 4, out).isOk());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], bitsToFloat(0xc0490000u)); // -3.140625
  EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[3]));
  // f32 from an odd address (safetensors data need not be aligned).
  unsigned char f32[9] = {0, 0x00, 0x00, 0x80, 0x3f, 0xdb, 0x0f, 0x49, 0x40};
  ASSERT_TRUE(io::decodeToFloat(io::DType::F32, f32 + 1, 2, out).isOk());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], bitsToFloat(0x40490fdbu));
  Status s = io::decodeToFloat(io::DType::I32, f32, 1, out);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("I32"), std::string::npos) << s.message();
}

TEST(InterpreterWeightsTest, MappedFile) {
  testing::TempDir tmp;
  testing::writeFile(tmp.file("data"), "hello");
  testing::writeFile(tmp.file("empty"), "");
  StatusOr<io::MappedFile> file = io::MappedFile::open(tmp.file("data"));
  ASSERT_TRUE(file.isOk()) << file.status().message();
  io::MappedFile moved = std::move(file).value();
  EXPECT_EQ(moved.bytes(), "hello");
  StatusOr<io::MappedFile> empty = io::MappedFile::open(tmp.file("empty"));
  ASSERT_TRUE(empty.isOk()) << empty.status().message();
  EXPECT_TRUE(empty->bytes().empty());
  StatusOr<io::MappedFile> missing = io::MappedFile::open(tmp.file("nope"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  StatusOr<io::MappedFile> dir = io::MappedFile::open(tmp.path());
  EXPECT_FALSE(dir.isOk());
}

// The llama fixture stores f32, so decoded tensors are the file's bytes.
TEST(InterpreterWeightsTest, StoreDecodesCheckpointTensorsLazily) {
  llvm::Expected<ModelSource> src = loadModelSource(kFixtures + "/llama");
  ASSERT_TRUE(bool(src)) << llvm::toString(src.takeError());
  llvm::Expected<WeightStore> store = WeightStore::fromCheckpoint(*src->checkpoint);
  ASSERT_TRUE(bool(store)) << llvm::toString(store.takeError());
  EXPECT_TRUE(store->contains("model.norm.weight"));
  auto norm = store->get("model.norm.weight");
  ASSERT_TRUE(bool(norm)) << llvm::toString(norm.takeError());
  EXPECT_EQ((*norm)->shape, (std::vector<int64_t>{64}));
  const CheckpointTensor &info = src->checkpoint->tensors.at("model.norm.weight");
  std::string bytes =
      testing::readFile(src->checkpoint->files[info.file].path)
          .substr(src->checkpoint->files[info.file].dataOffset() + info.info.dataBegin,
                  256);
  EXPECT_EQ(std::memcmp(bytes.data(), (*norm)->f.data(), 256), 0);
  auto again = store->get("model.norm.weight");
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(again->get(), norm->get()); // decoded once
  auto missing = store->get("nope");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(errorText(missing.takeError()).find("weight 'nope'"), std::string::npos);
}

} // namespace
} // namespace weft::reference

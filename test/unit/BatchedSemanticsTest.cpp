// The scheduler's steps mean what they should: the reference interpreter
// runs the compiled buckets (decode tokens of several sequences beside
// prompt chunks of several sequences, padded, with preemption) and every
// sequence gets the logits and tokens it gets alone, and for the fixture's
// own prompt the ones Hugging Face transformers computed.
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/Importer.h"
#include "compiler/Reference/FixtureRunner.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "runtime/serve/BlockTables.h"
#include "runtime/serve/Scheduler.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

namespace weft {
namespace {

using reference::Tensor;

// A StepRunner over the interpreter: the step goes through the function of
// its size; the interpreter's cache is keyed by (layer, slot, position), so
// block tables only need to pass the engine's checks. Pads (slot -1) run in
// a spare slot of their own, since the interpreter refuses negative slots.
class InterpreterRunner : public serve::StepRunner {
public:
  InterpreterRunner(mlir::ModuleOp module, const reference::WeightStore &weights,
                    int64_t vocab, serve::KvLayout kv)
      : interpreter_(weights, &cache_), vocab_(vocab), kv_(kv),
        tables_(std::move(serve::BlockTables::create(kv).value())) {
    for (auto fn : module.getOps<mlir::func::FuncOp>())
      if (auto t = fn->getAttrOfType<mlir::IntegerAttr>("weft.tokens"))
        if (!bySize_.count(int(t.getInt())) || fn.getSymName().starts_with("decode"))
          bySize_[int(t.getInt())] = fn;
  }
  const serve::KvLayout &kvLayout() const override { return kv_; }
  int vocabSize() const override { return int(vocab_); }
  bool samples() const override { return false; }
  std::vector<int> stepSizes() const override {
    std::vector<int> sizes;
    for (auto &[n, fn] : bySize_)
      sizes.push_back(n);
    return sizes;
  }
  Status setBlockTable(int slot, const std::vector<int32_t> &pages) override {
    // Pages: the interpreter's cache is keyed by slot, so a page another
    // sequence computed (prefix caching) has its keys and values brought
    // into this slot's positions of that block, as a paged cache would
    // show them through the block table.
    const std::vector<int32_t> &held = held_[slot];
    for (size_t b = 0; b < pages.size(); ++b) {
      if (b < held.size() && held[b] == pages[b])
        continue; // already this slot's
      auto stored = pageStore_.find(pages[b]);
      if (stored == pageStore_.end())
        continue; // a fresh page: the step that writes it fills it
      for (const auto &[offset, entries] : stored->second) {
        cache_.put(slot, int32_t(b) * kv_.blockTokens + offset, entries);
        ++positionsShared;
      }
    }
    held_[slot] = pages;
    return tables_.set(slot, pages);
  }
  Status runStep(const serve::StepInputs &in, serve::StepOutputs &out) override {
    WEFT_RETURN_IF_ERROR(tables_.check("step", in, int(vocab_)));
    auto it = bySize_.find(int(in.ids.size()));
    if (it == bySize_.end())
      return invalidArgument("no function of " + std::to_string(in.ids.size()) + " tokens");
    ++steps;
    std::vector<int32_t> slots = in.slots, positions = in.positions;
    int chunks = 0, decodes = 0;
    std::map<int32_t, int> rows;
    for (size_t t = 0; t < slots.size(); ++t) {
      if (slots[t] < 0) {
        slots[t] = kv_.maxSequences; // the pads' own slot
        positions[t] = int32_t(t);
      } else {
        ++rows[slots[t]];
      }
    }
    for (auto [slot, n] : rows)
      (n > 1 ? chunks : decodes) += 1;
    mixedSteps += chunks > 0 && decodes > 0;
    multiChunkSteps += chunks > 1;
    mlir::func::FuncOp fn = it->second;
    std::vector<Tensor> args;
    args.push_back(Tensor::ints(std::vector<int32_t>(in.ids)));
    args.push_back(Tensor::ints(std::move(positions)));
    args.push_back(Tensor::ints(std::move(slots)));
    args.push_back(Tensor());
    for (unsigned i = 4; i < fn.getNumArguments(); ++i)
      args.push_back(Tensor::floats({int64_t(in.ids.size())}));
    llvm::Expected<std::vector<Tensor>> r = interpreter_.run(fn, std::move(args));
    if (!r)
      return internalError(llvm::toString(r.takeError()));
    // What the step wrote now lives in its page (a later sequence given the
    // page reads it from there).
    for (size_t t = 0; t < in.slots.size(); ++t)
      if (in.slots[t] >= 0) {
        int32_t page = held_[in.slots[t]][size_t(in.positions[t] / kv_.blockTokens)];
        pageStore_[page][in.positions[t] % kv_.blockTokens] =
            cache_.at(in.slots[t], in.positions[t]);
      }
    out.next = (*r)[1].i;
    const std::vector<float> &logits = (*r)[0].f;
    size_t vocab = size_t(vocab_);
    for (int32_t row : in.logitRows)
      out.logits.insert(out.logits.end(), logits.begin() + long(size_t(row) * vocab),
                        logits.begin() + long(size_t(row + 1) * vocab));
    return Status::ok();
  }

  int steps = 0, mixedSteps = 0, multiChunkSteps = 0;
  int positionsShared = 0; // brought from pages other sequences computed

private:
  reference::KvCache cache_;
  reference::Interpreter interpreter_;
  int64_t vocab_;
  serve::KvLayout kv_;
  serve::BlockTables tables_;
  std::map<int, mlir::func::FuncOp> bySize_;
  std::map<int, std::vector<int32_t>> held_; // slot -> its pages
  // page -> offset -> every layer's keys and values written there
  std::map<int32_t, std::map<int32_t, std::vector<std::pair<int64_t, reference::KvCache::Entry>>>>
      pageStore_;
};

struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

TEST(BatchedSemanticsTest, MixedStepsMatchEachSequenceAlone) {
  registerAllWeftPasses();
  mlir::MLIRContext context;
  context.loadDialect<WeftDialect, mlir::func::FuncDialect>();
  std::string dir = std::string(WEFT_FIXTURES_DIR) + "/llama";
  llvm::Expected<ModelSource> source = loadModelSource(dir);
  ASSERT_TRUE(bool(source)) << llvm::toString(source.takeError());
  llvm::Expected<reference::WeightStore> weights =
      reference::WeightStore::fromCheckpoint(*source->checkpoint);
  ASSERT_TRUE(bool(weights)) << llvm::toString(weights.takeError());
  llvm::Expected<reference::FixtureReference> expected = reference::readFixtureReference(dir);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());

  mlir::OwningOpRef<mlir::ModuleOp> module = importModel(context, source->config);
  mlir::PassManager pm(&context);
  CompileOptions options;
  options.maxBatch = 8;          // decode buckets 1, 2, 4, 8
  options.prefillChunks = {16};  // and a 16-token step
  buildDefaultPipeline(pm, options);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  serve::KvLayout kv;
  kv.blockTokens = 4;
  kv.maxSequences = 6;
  kv.maxBlocksPerSequence = 16; // context 64
  kv.pages = 28;                // too few for all at once: preemption
  int64_t vocab = expected->vocabSize;

  // The fixture's prompt, and others of 1 to 30 tokens.
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> prompts = {expected->promptIds};
  for (int n : {1, 30, 7, 2, 19, 12, 25}) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int32_t &t : p)
      t = int32_t(rng() % uint32_t(vocab));
    prompts.push_back(p);
  }
  const int maxTokens = 10;

  auto run = [&](const std::vector<std::vector<int32_t>> &batch, InterpreterRunner &runner,
                 serve::SchedulerStats *stats, bool prefixCaching = false) {
    std::vector<Result> results(batch.size());
    serve::SchedulerOptions schedulerOptions;
    schedulerOptions.prefixCaching = prefixCaching;
    serve::Scheduler scheduler(runner, schedulerOptions);
    for (size_t i = 0; i < batch.size(); ++i) {
      serve::Request r;
      r.prompt = batch[i];
      r.maxTokens = maxTokens;
      r.wantPromptLogits = true;
      Result *res = &results[i];
      r.onEvent = [res](const serve::Event &e) {
        if (e.token >= 0)
          res->tokens.push_back(e.token);
        if (e.promptLogits)
          res->logits = *e.promptLogits;
      };
      EXPECT_TRUE(scheduler.submit(std::move(r)).isOk());
    }
    Status st = scheduler.runUntilIdle();
    EXPECT_TRUE(st.isOk()) << st.message();
    if (stats)
      *stats = scheduler.stats();
    return results;
  };

  InterpreterRunner together(*module, *weights, vocab, kv);
  serve::SchedulerStats stats;
  std::vector<Result> batched = run(prompts, together, &stats);
  // The schedule really mixed: decode tokens beside chunks, chunks of two
  // prompts in one step, and preemption.
  EXPECT_GT(together.mixedSteps, 0);
  EXPECT_GT(together.multiChunkSteps, 0);
  EXPECT_GT(stats.preemptions, 0u);

  // Each sequence of `batch` got what it gets alone.
  auto expectEachAsAlone = [&](const std::vector<std::vector<int32_t>> &batch,
                               const std::vector<Result> &together, const char *what) {
    for (size_t i = 0; i < batch.size(); ++i) {
      InterpreterRunner alone(*module, *weights, vocab, kv);
      std::vector<Result> single = run({batch[i]}, alone, nullptr);
      EXPECT_EQ(together[i].tokens, single[0].tokens) << what << " " << i;
      EXPECT_LE(reference::maxRelativeError(together[i].logits, single[0].logits), 1e-5)
          << what << " " << i;
    }
  };
  expectEachAsAlone(prompts, batched, "prompt");
  // Prefix caching: prompts that begin with 0-29 tokens of the fixture's
  // prompt around the 4-token blocks, together, with the cache on: each
  // gets what it gets alone, and some positions came from pages other
  // sequences computed.
  std::vector<std::vector<int32_t>> sharing;
  const std::vector<int32_t> &base = prompts[2]; // 30 tokens
  for (int shared : {0, 3, 4, 5, 8, 12, 13, 29}) {
    std::vector<int32_t> p(base.begin(), base.begin() + shared);
    for (int n = 1 + int(rng() % 6); n > 0; --n)
      p.push_back(int32_t(rng() % uint32_t(vocab)));
    sharing.push_back(p);
  }
  InterpreterRunner cached(*module, *weights, vocab, kv);
  serve::SchedulerStats cachedStats;
  std::vector<Result> shared = run(sharing, cached, &cachedStats, /*prefixCaching=*/true);
  EXPECT_GT(cachedStats.prefixHitTokens, 0u);
  EXPECT_GT(cached.positionsShared, 0);
  expectEachAsAlone(sharing, shared, "shared prompt");

  // And the fixture's prompt gives what transformers computed.
  std::vector<float> last(expected->logits.end() - vocab, expected->logits.end());
  EXPECT_LE(reference::maxRelativeError(batched[0].logits, last), 1e-4);
  size_t n = std::min(batched[0].tokens.size(), expected->greedyContinuation.size());
  EXPECT_TRUE(std::equal(batched[0].tokens.begin(), batched[0].tokens.begin() + long(n),
                         expected->greedyContinuation.begin()));
}

} // namespace
} // namespace weft

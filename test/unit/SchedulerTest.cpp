// The scheduler over a fake runner that keeps a real paged cache of token
// ids: each step writes every token through its slot's block table, then
// each token's "next token" is a hash of its whole sequence read back
// through the table. A scheduling bug (a wrong page, a missing chunk, a
// stale table after preemption) changes the outputs or reads an unwritten
// position.
#include "runtime/serve/BlockTables.h"
#include "runtime/serve/Scheduler.h"

#include <gtest/gtest.h>

#include <functional>

#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace weft::serve {
namespace {

constexpr int kVocab = 1000;

// The "model": the next token after `context`.
int32_t nextToken(const std::vector<int32_t> &context) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context)
    h = (h ^ uint64_t(t)) * 1099511628211ull;
  return int32_t(h % kVocab);
}

std::vector<int32_t> reference(std::vector<int32_t> context, int maxTokens,
                               const std::vector<int32_t> &stop = {}) {
  std::vector<int32_t> out;
  while (int(out.size()) < maxTokens) {
    int32_t t = nextToken(context);
    out.push_back(t);
    context.push_back(t);
    if (std::find(stop.begin(), stop.end(), t) != stop.end())
      break;
  }
  return out;
}

class FakeRunner : public StepRunner {
public:
  FakeRunner(int blockTokens, int sequences, int blocksPerSequence, int pages,
             std::vector<int> sizes)
      : sizes_(std::move(sizes)) {
    kv_.blockTokens = blockTokens;
    kv_.maxSequences = sequences;
    kv_.maxBlocksPerSequence = blocksPerSequence;
    kv_.pages = pages;
    tables_.assign(size_t(sequences), {});
    cache_.assign(size_t(pages) * size_t(blockTokens), -1);
    checks_.emplace(std::move(BlockTables::create(kv_).value()));
  }
  const KvLayout &kvLayout() const override { return kv_; }
  int vocabSize() const override { return kVocab; }
  bool samples() const override { return false; }
  std::vector<int> stepSizes() const override { return sizes_; }
  Status setBlockTable(int slot, const std::vector<int32_t> &pages) override {
    if (slot < 0 || slot >= kv_.maxSequences || int(pages.size()) > kv_.maxBlocksPerSequence)
      return invalidArgument("bad block table");
    for (int32_t p : pages)
      if (p < 0 || p >= kv_.pages)
        return invalidArgument("bad page");
    // A page held by two live slots at once is a leak of the allocator,
    // unless prefix caching shares it (then nobody may write it: execute).
    if (!sharedPages)
      for (size_t s = 0; s < tables_.size(); ++s)
        if (int(s) != slot)
          for (int32_t p : tables_[s])
            if (std::find(pages.begin(), pages.end(), p) != pages.end())
              return invalidArgument("page " + std::to_string(p) + " shared by two slots");
    // The slot that takes a page no other slot holds computes it; slots
    // that share it later only read it.
    for (int32_t p : pages)
      if (holders(p, slot) == 0 &&
          std::find(tables_[size_t(slot)].begin(), tables_[size_t(slot)].end(), p) ==
              tables_[size_t(slot)].end())
        owner_[p] = slot;
    tables_[size_t(slot)] = pages;
    return checks_->set(slot, pages);
  }
  Status runStep(const StepInputs &in, StepOutputs &out) override {
    WEFT_RETURN_IF_ERROR(admit(in));
    return execute(in, out);
  }

  // Like the GPU: a launch checks the step and takes the block tables as
  // they are; the step runs (in launch order) when it is waited for, so
  // table changes made after a launch reach only later steps, and fed
  // tokens are read from the step before.
  Status launchStep(const StepInputs &in) override {
    if (!deferred)
      return StepRunner::launchStep(in);
    if (queued_.size() >= size_t(maxStepsInFlight()))
      return failedPrecondition("too many steps in flight");
    std::vector<size_t> launched;
    for (size_t a = 1; a < size_t(maxStepsInFlight()) && a <= launchedSizes_.size(); ++a)
      launched.push_back(launchedSizes_[launchedSizes_.size() - a]);
    WEFT_RETURN_IF_ERROR(checkFeed(in, launched));
    WEFT_RETURN_IF_ERROR(admit(in));
    for (size_t t = 0; t < in.feed.size(); ++t) {
      fedTokens += in.feed[t] >= 0;
      if (in.feed[t] >= 0 && !in.feedAge.empty())
        maxFeedAge = std::max(maxFeedAge, int(in.feedAge[t]));
    }
    queued_.push_back({in, tables_, launchedSizes_.size()});
    launchedSizes_.push_back(in.ids.size());
    maxInFlight = std::max(maxInFlight, int(queued_.size()));
    return Status::ok();
  }
  Status waitStep(StepOutputs &out) override {
    if (!deferred)
      return StepRunner::waitStep(out);
    if (queued_.empty())
      return failedPrecondition("nothing launched");
    Queued q = std::move(queued_.front());
    queued_.erase(queued_.begin());
    for (size_t t = 0; t < q.in.feed.size(); ++t)
      if (q.in.feed[t] >= 0) {
        size_t age = q.in.feedAge.empty() ? 1 : size_t(q.in.feedAge[t]);
        auto from = executedNext_.find(q.launch - age);
        if (from == executedNext_.end()) // that step failed: nothing to feed
          return internalError("the fed token's step did not run");
        q.in.ids[t] = from->second[size_t(q.in.feed[t])];
      }
    std::swap(tables_, q.tables);
    Status st = execute(q.in, out);
    std::swap(tables_, q.tables);
    executedNext_[q.launch] = out.next;
    return st;
  }
  int microBatches() const override { return lanes; }

  Status admit(const StepInputs &in) {
    if (failNext) {
      if (duringFailure)
        duringFailure();
      return internalError("injected failure");
    }
    size_t T = in.ids.size();
    if (std::find(sizes_.begin(), sizes_.end(), int(T)) == sizes_.end())
      return invalidArgument("no bucket of " + std::to_string(T) + " tokens");
    ++steps;
    // The engine's own checks: every step the scheduler builds must pass.
    return checks_->check("step", in, kVocab);
  }

  Status execute(const StepInputs &in, StepOutputs &out) {
    size_t T = in.ids.size();
    std::map<int, int> rowsOfSlot;
    for (size_t t = 0; t < T; ++t) {
      int slot = in.slots[t];
      if (slot == -1)
        continue;
      ++rowsOfSlot[slot];
      int32_t *cell = at(slot, in.positions[t]);
      if (!cell)
        return outOfRange("token " + std::to_string(t) + " outside its pages");
      int32_t page = pageOf(slot, in.positions[t]);
      if (sharedPages && holders(page) > 1 && owner_[page] != slot)
        return internalError("token " + std::to_string(t) + " of slot " + std::to_string(slot) +
                             " writes page " + std::to_string(page) +
                             ", which it shares with the slot that computed it");
      *cell = in.ids[t];
    }
    int chunks = 0;
    for (auto [slot, rows] : rowsOfSlot)
      chunks += rows > 1;
    maxChunksInStep = std::max(maxChunksInStep, chunks);
    mixedSteps += chunks > 0 && rowsOfSlot.size() > size_t(chunks);
    out.next.assign(T, 0);
    for (size_t t = 0; t < T; ++t) {
      if (in.slots[t] == -1)
        continue;
      std::vector<int32_t> context;
      for (int p = 0; p <= in.positions[t]; ++p) {
        int32_t *cell = at(in.slots[t], p);
        if (!cell || *cell < 0)
          return internalError("read an unwritten position");
        context.push_back(*cell);
      }
      out.next[t] = nextToken(context);
    }
    out.logits.assign(in.logitRows.size() * kVocab, 0.0f);
    for (size_t i = 0; i < in.logitRows.size(); ++i)
      out.logits[i * kVocab + size_t(out.next[size_t(in.logitRows[i])])] = 1.0f;
    return Status::ok();
  }

  int pagesHeld() const {
    int n = 0;
    for (const auto &t : tables_)
      n += int(t.size());
    return n;
  }

  bool failNext = false;
  bool sharedPages = false; // prefix caching: slots may share pages
  std::function<void()> duringFailure; // runs inside the failing step
  bool deferred = true; // false: the StepRunner defaults (run at launch)
  int lanes = 1;         // micro-batches the fake claims to overlap
  int steps = 0, maxChunksInStep = 0, mixedSteps = 0;
  int maxInFlight = 0, fedTokens = 0, maxFeedAge = 0;

private:
  struct Queued {
    StepInputs in;
    std::vector<std::vector<int32_t>> tables;
    size_t launch; // its number among all launches
  };
  std::vector<Queued> queued_;
  std::vector<size_t> launchedSizes_;                  // by launch
  std::map<size_t, std::vector<int32_t>> executedNext_; // by launch

  int32_t pageOf(int slot, int pos) const {
    return tables_[size_t(slot)][size_t(pos / kv_.blockTokens)];
  }
  // Slots (other than `except`) whose table holds `page`.
  int holders(int32_t page, int except = -1) const {
    int n = 0;
    for (size_t s = 0; s < tables_.size(); ++s)
      n += int(s) != except &&
           std::find(tables_[s].begin(), tables_[s].end(), page) != tables_[s].end();
    return n;
  }
  int32_t *at(int slot, int pos) {
    const std::vector<int32_t> &table = tables_[size_t(slot)];
    size_t block = size_t(pos / kv_.blockTokens);
    if (pos < 0 || block >= table.size())
      return nullptr;
    return &cache_[size_t(table[block]) * size_t(kv_.blockTokens) + size_t(pos % kv_.blockTokens)];
  }

  KvLayout kv_;
  std::vector<int> sizes_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> cache_;
  std::map<int32_t, int> owner_; // page -> the slot that computes it
  std::optional<BlockTables> checks_;
};

struct Collected {
  std::vector<int32_t> tokens;
  Finish finish = Finish::None;
  int finals = 0;
  int stopString = -1;
};

Request makeRequest(std::vector<int32_t> prompt, int maxTokens, Collected &c) {
  Request r;
  r.prompt = std::move(prompt);
  r.maxTokens = maxTokens;
  r.onEvent = [&c](const Event &e) {
    if (e.token >= 0) {
      EXPECT_EQ(e.index, int(c.tokens.size()));
      c.tokens.push_back(e.token);
    }
    if (e.finish != Finish::None) {
      c.finish = e.finish;
      c.stopString = e.stopString;
      ++c.finals;
    }
  };
  return r;
}

std::vector<int32_t> randomPrompt(std::mt19937 &rng, int length) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (int32_t &t : p)
    t = int32_t(rng() % kVocab);
  return p;
}

TEST(SchedulerTest, OneSequenceMatchesTheModel) {
  FakeRunner runner(4, 2, 16, 32, {1, 2, 4, 8});
  Scheduler s(runner);
  Collected c;
  std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  ASSERT_TRUE(s.submit(makeRequest(prompt, 9, c)).isOk());
  ASSERT_TRUE(s.runUntilIdle().isOk());
  EXPECT_EQ(c.tokens, reference(prompt, 9));
  EXPECT_EQ(c.finish, Finish::Length);
  EXPECT_EQ(c.finals, 1);
  // 11 prompt tokens in chunks of 8 then 3 (padded to 4), then 8 decode steps.
  EXPECT_EQ(runner.steps, 10);
  EXPECT_EQ(runner.pagesHeld(), 0);
  EXPECT_EQ(s.stats().pagesFree, 32);
}

TEST(SchedulerTest, ManySequencesShareStepsAndChunks) {
  // 20 sequences of 1 to 40 prompt tokens, 16 slots, steps of up to 32
  // tokens: decode tokens and chunks of several prompts share steps.
  FakeRunner runner(4, 16, 32, 256, {1, 2, 4, 8, 16, 32});
  Scheduler s(runner);
  std::mt19937 rng(7);
  std::vector<Collected> c(20);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 20; ++i) {
    prompts.push_back(randomPrompt(rng, 1 + int(rng() % 40)));
    ASSERT_TRUE(s.submit(makeRequest(prompts.back(), 5 + i % 7, c[size_t(i)])).isOk());
  }
  ASSERT_TRUE(s.runUntilIdle().isOk());
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(c[size_t(i)].tokens, reference(prompts[size_t(i)], 5 + i % 7)) << i;
    EXPECT_EQ(c[size_t(i)].finals, 1) << i;
  }
  EXPECT_GE(runner.maxChunksInStep, 2); // one step held chunks of two prompts
  EXPECT_GT(runner.mixedSteps, 0);      // and decode tokens beside a chunk
  // The host built each step while the one before was on the "GPU", and
  // decode tokens came from there.
  EXPECT_EQ(runner.maxInFlight, 2);
  EXPECT_GT(runner.fedTokens, 0);
  EXPECT_EQ(runner.pagesHeld(), 0);
  EXPECT_EQ(s.stats().pagesFree, 256);
}

// 24 pages of 4 tokens for 6 sequences that grow to 33 positions each
// (9 pages): they cannot all stay; the newest go back and are recomputed.
void preemptionRun(bool deferred, int lanes) {
  FakeRunner runner(4, 6, 16, 24, {1, 2, 4, 8, 16});
  runner.deferred = deferred;
  runner.lanes = lanes;
  Scheduler s(runner);
  std::mt19937 rng(3);
  std::vector<Collected> c(6);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(randomPrompt(rng, 10));
    ASSERT_TRUE(s.submit(makeRequest(prompts.back(), 24, c[size_t(i)])).isOk());
  }
  ASSERT_TRUE(s.runUntilIdle().isOk());
  EXPECT_GT(s.stats().preemptions, 0u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c[size_t(i)].tokens, reference(prompts[size_t(i)], 24)) << i;
    EXPECT_EQ(c[size_t(i)].finish, Finish::Length);
  }
  EXPECT_EQ(runner.pagesHeld(), 0);
  EXPECT_EQ(s.stats().pagesFree, 24);
}

TEST(SchedulerTest, PreemptedSequencesResumeWithTheSameOutput) { preemptionRun(true, 1); }

TEST(SchedulerTest, RandomSubmitCancelAndFinishNeverLeak) {
  FakeRunner runner(4, 8, 16, 40, {1, 2, 4, 8, 16});
  Scheduler s(runner);
  std::mt19937 rng(11);
  std::vector<std::unique_ptr<Collected>> collected;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> maxTokens;
  std::vector<uint64_t> ids;
  std::set<uint64_t> cancelled;
  for (int event = 0; event < 10000; ++event) {
    int kind = int(rng() % 10);
    if (kind < 3) {
      collected.push_back(std::make_unique<Collected>());
      prompts.push_back(randomPrompt(rng, 1 + int(rng() % 30)));
      maxTokens.push_back(1 + int(rng() % 20));
      StatusOr<uint64_t> id =
          s.submit(makeRequest(prompts.back(), maxTokens.back(), *collected.back()));
      ASSERT_TRUE(id.isOk()) << id.status().message();
      ids.push_back(*id);
    } else if (kind == 3 && !ids.empty()) {
      uint64_t id = ids[rng() % ids.size()];
      s.cancel(id);
      cancelled.insert(id);
      s.cancel(id + 100000); // unknown: no-op
    } else {
      ASSERT_TRUE(s.step().isOk());
    }
    SchedulerStats st = s.stats();
    ASSERT_EQ(st.pagesFree + runner.pagesHeld(), st.pagesTotal) << "event " << event;
  }
  ASSERT_TRUE(s.runUntilIdle().isOk());
  EXPECT_EQ(runner.pagesHeld(), 0);
  EXPECT_EQ(s.stats().pagesFree, 40);
  EXPECT_GT(s.stats().preemptions, 0u);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Collected &c = *collected[i];
    EXPECT_EQ(c.finals, 1) << "request " << i << " heard " << c.finals << " final events";
    if (c.finish == Finish::Cancelled) {
      EXPECT_TRUE(cancelled.count(ids[i])) << i;
      std::vector<int32_t> ref = reference(prompts[i], maxTokens[i]);
      EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), ref.begin())) << i;
    } else {
      // Nobody starves: everything not cancelled ran to its end, right.
      EXPECT_EQ(c.finish, Finish::Length) << i;
      EXPECT_EQ(c.tokens, reference(prompts[i], maxTokens[i])) << i;
    }
  }
}

// Prefix caching: requests that share prefixes of every length around the
// block boundaries (0, 1, 15, 16, 17, 31, 32, 33 tokens, a whole prompt)
// get the same tokens as without it and as the model; the shared blocks
// are read, never written (the fake refuses a write into a shared page),
// and the stats count what was taken from the cache.
void prefixRun(bool caching, int lanes, int pages, std::vector<std::vector<int32_t>> &outputs,
               SchedulerStats &stats) {
  FakeRunner runner(16, 8, 16, pages, {1, 2, 4, 8, 16, 32});
  runner.sharedPages = true;
  runner.lanes = lanes;
  SchedulerOptions options;
  options.prefixCaching = caching;
  Scheduler s(runner, options);
  std::mt19937 rng(7);
  std::vector<int32_t> base = randomPrompt(rng, 80);
  std::vector<Collected> collected(40);
  std::vector<std::vector<int32_t>> prompts;
  int i = 0;
  for (int round = 0; round < 4; ++round)
    for (int shared : {0, 1, 15, 16, 17, 31, 32, 33, 48, 80}) {
      std::vector<int32_t> prompt(base.begin(), base.begin() + shared);
      if (shared < 80 || round % 2) {
        std::vector<int32_t> rest = randomPrompt(rng, 1 + int(rng() % 40));
        prompt.insert(prompt.end(), rest.begin(), rest.end());
      }
      prompts.push_back(prompt);
      ASSERT_TRUE(s.submit(makeRequest(prompt, 6 + int(rng() % 20), collected[size_t(i++)])).isOk());
    }
  ASSERT_TRUE(s.runUntilIdle().isOk());
  outputs.clear();
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ(collected[r].tokens, reference(prompts[r], int(collected[r].tokens.size())))
        << "request " << r;
    EXPECT_EQ(collected[r].finals, 1);
    outputs.push_back(collected[r].tokens);
  }
  stats = s.stats();
  EXPECT_EQ(runner.pagesHeld(), 0);
  EXPECT_EQ(stats.pagesFree, pages) << "every page free or idle in the cache when idle";
}

TEST(SchedulerTest, PrefixCachingKeepsEveryOutput) {
  for (int lanes : {1, 2})
    for (int pages : {200, 24}) { // plenty, and few (preemption, eviction)
      std::vector<std::vector<int32_t>> off, on;
      SchedulerStats offStats, onStats;
      prefixRun(false, lanes, pages, off, offStats);
      prefixRun(true, lanes, pages, on, onStats);
      EXPECT_EQ(on, off) << lanes << " lanes, " << pages << " pages";
      EXPECT_EQ(offStats.prefixHitTokens, 0u);
      EXPECT_EQ(offStats.cachedPages, 0);
      EXPECT_GT(onStats.prefixQueries, 0u);
      // The first request of a prefix computes it; later ones share it.
      if (pages == 200 && lanes == 1)
        EXPECT_GE(onStats.prefixHitTokens, 3u * (16 + 16 + 16 + 32 + 32 + 32 + 48 + 64));
      EXPECT_EQ(onStats.idleCachedPages, onStats.cachedPages) << "nothing in use when idle";
    }
}

TEST(SchedulerTest, PrefixCachingReportsCachedPromptTokens) {
  FakeRunner runner(4, 2, 16, 32, {1, 2, 4, 8});
  runner.sharedPages = true;
  SchedulerOptions options;
  options.prefixCaching = true;
  Scheduler s(runner, options);
  std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  int cached[3] = {-1, -1, -1};
  for (int r = 0; r < 3; ++r) {
    Collected c;
    Request q = makeRequest(r == 2 ? std::vector<int32_t>(prompt.begin(), prompt.begin() + 8)
                                   : prompt,
                            3, c);
    auto inner = q.onEvent;
    q.onEvent = [&, r, inner](const Event &e) {
      if (e.index == 0 && e.token >= 0)
        cached[r] = e.cachedPromptTokens;
      inner(e);
    };
    ASSERT_TRUE(s.submit(std::move(q)).isOk());
    ASSERT_TRUE(s.runUntilIdle().isOk());
    EXPECT_EQ(c.tokens, reference(r == 2 ? std::vector<int32_t>(prompt.begin(), prompt.begin() + 8)
                                         : prompt,
                                  3));
  }
  EXPECT_EQ(cached[0], 0);
  EXPECT_EQ(cached[1], 8) << "two whole blocks of 4; the last 2 tokens are computed";
  // A prompt of exactly two blocks: its last token is computed again (the
  // step samples after it), so only the first block is shared.
  EXPECT_EQ(cached[2], 4);
}

// The bad inputs for prefix caching: a prompt that fills the whole
// context, a prefix that ends inside a block, a cancelled request whose
// blocks another is using, and a cache whose every page is in use. Each is
// answered as without the cache, and no page is lost: once idle, every page
// is free or an idle cached block.
TEST(SchedulerTest, PrefixCachingEdgeCases) {
  // Blocks of 4, context 32 (8 blocks a sequence), 12 pages in all.
  FakeRunner runner(4, 3, 8, 12, {1, 2, 4, 8});
  runner.sharedPages = true;
  SchedulerOptions options;
  options.prefixCaching = true;
  Scheduler s(runner, options);
  std::mt19937 rng(11);
  std::vector<int32_t> base = randomPrompt(rng, 32);

  // A prompt of the whole context (max_tokens 1: 32 positions), twice: the
  // second shares 7 blocks and computes the last one.
  for (int r = 0; r < 2; ++r) {
    Collected c;
    ASSERT_TRUE(s.submit(makeRequest(base, 1, c)).isOk());
    ASSERT_TRUE(s.runUntilIdle().isOk());
    EXPECT_EQ(c.tokens, reference(base, 1));
  }
  EXPECT_EQ(s.stats().prefixHitTokens, 28u);

  // A prefix that ends inside a block: 10 tokens of base, then others;
  // only the 2 whole blocks are shared.
  {
    std::vector<int32_t> p(base.begin(), base.begin() + 10);
    p.push_back(999);
    p.push_back(998);
    Collected c;
    uint64_t before = s.stats().prefixHitTokens;
    ASSERT_TRUE(s.submit(makeRequest(p, 4, c)).isOk());
    ASSERT_TRUE(s.runUntilIdle().isOk());
    EXPECT_EQ(c.tokens, reference(p, 4));
    EXPECT_EQ(s.stats().prefixHitTokens - before, 8u);
  }

  // A cancelled request whose blocks another is using: both start on the
  // same 16-token prefix; cancelling the first leaves the second right.
  {
    std::vector<int32_t> a(base.begin(), base.begin() + 16), b = a;
    a.push_back(7);
    b.push_back(8);
    Collected ca, cb;
    uint64_t ida = s.submit(makeRequest(a, 10, ca)).value();
    ASSERT_TRUE(s.submit(makeRequest(b, 10, cb)).isOk());
    ASSERT_TRUE(s.step().isOk());
    ASSERT_TRUE(s.step().isOk());
    s.cancel(ida);
    ASSERT_TRUE(s.runUntilIdle().isOk());
    EXPECT_EQ(ca.finish, Finish::Cancelled);
    EXPECT_EQ(cb.tokens, reference(b, 10));
  }

  // Every page in use: three sequences of 16-token prompts growing to 4
  // blocks hold all 12 pages; a fourth waits (never an error) and runs
  // when pages come back.
  {
    std::vector<Collected> cs(4);
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < 4; ++i) {
      ps.push_back(randomPrompt(rng, 13));
      ASSERT_TRUE(s.submit(makeRequest(ps.back(), 3, cs[size_t(i)])).isOk());
    }
    ASSERT_TRUE(s.runUntilIdle().isOk());
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(cs[size_t(i)].tokens, reference(ps[size_t(i)], 3)) << i;
  }

  SchedulerStats st = s.stats();
  EXPECT_EQ(st.pagesFree, st.pagesTotal) << "every page free or idle in the cache";
  EXPECT_EQ(st.idleCachedPages, st.cachedPages) << "no cached block in use when idle";
  EXPECT_EQ(runner.pagesHeld(), 0);
}

TEST(SchedulerTest, StopTokensAndStringsSplitAcrossTokens) {
  FakeRunner runner(4, 2, 16, 32, {1, 2, 4, 8});
  // Token t reads as a letter; a stop string of two letters spans two tokens.
  SchedulerOptions options;
  options.decode = [](const int32_t *t, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i)
      s += char('a' + t[i] % 26);
    return s;
  };
  Scheduler s(runner, options);
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> ref = reference(prompt, 20);
  std::string text;
  for (int32_t t : ref)
    text += char('a' + t % 26);
  Collected a, b;
  Request ra = makeRequest(prompt, 20, a);
  ra.stopStrings = {"zzzz", text.substr(3, 2)};
  ASSERT_TRUE(s.submit(std::move(ra)).isOk());
  Request rb = makeRequest(prompt, 20, b);
  rb.stopTokens = {ref[6]};
  ASSERT_TRUE(s.submit(std::move(rb)).isOk());
  ASSERT_TRUE(s.runUntilIdle().isOk());
  size_t end = text.find(text.substr(3, 2)) + 2; // first match may come earlier
  EXPECT_EQ(a.finish, Finish::Stop);
  EXPECT_EQ(a.stopString, 1);
  EXPECT_EQ(a.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + long(end)));
  EXPECT_EQ(b.finish, Finish::Stop);
  size_t stopAt = size_t(std::find(ref.begin(), ref.end(), ref[6]) - ref.begin()) + 1;
  EXPECT_EQ(b.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + long(stopAt)));
}

// Stop strings see the text as the whole output decodes, not token by
// token: here, as with SentencePiece (Metaspace), an even token starts a
// word (" x") and a decode drops the space its first token starts with, so
// the token alone reads "x" and a stop " x" is found only in context.
TEST(SchedulerTest, StopStringsMatchTheTextInContext) {
  FakeRunner runner(4, 2, 16, 32, {1, 2, 4, 8});
  SchedulerOptions options;
  options.decode = [](const int32_t *t, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i)
      s += std::string(t[i] % 2 == 0 ? " " : "") + char('a' + t[i] % 26);
    return s.empty() || s[0] != ' ' ? s : s.substr(1);
  };
  Scheduler s(runner, options);
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> ref = reference(prompt, 20);
  // The first even token after the first output token: the stop is its word.
  size_t at = 1;
  while (at < ref.size() && ref[at] % 2 != 0)
    ++at;
  ASSERT_LT(at, ref.size()) << "the fake model makes no even token";
  std::string stop = std::string(" ") + char('a' + ref[at] % 26);
  Collected c;
  Request r = makeRequest(prompt, 20, c);
  r.stopStrings = {stop};
  ASSERT_TRUE(s.submit(std::move(r)).isOk());
  ASSERT_TRUE(s.runUntilIdle().isOk());
  EXPECT_EQ(c.finish, Finish::Stop);
  EXPECT_LE(c.tokens.size(), at + 1) << "the stop " << stop << " was missed";
}

// textAdded: what the last token adds, or nothing where it respells the
// ones before (here token 8 alone reads "?", and token 9 after it
// completes the character "!").
TEST(SchedulerTest, TextAddedSaysWhereATokenRespellsTheOnesBefore) {
  DecodeTokens decode = [](const int32_t *t, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) {
      if (t[i] == 8)
        s += i + 1 < n && t[i + 1] == 9 ? "!" : "?";
      else if (!(t[i] == 9 && i > 0 && t[i - 1] == 8))
        s += char('a' + t[i]);
    }
    return s;
  };
  const int32_t word[] = {0, 1, 2}, split[] = {0, 8, 9};
  EXPECT_EQ(textAdded(decode, word, 3), std::optional<std::string>("c"));
  EXPECT_EQ(textAdded(decode, word, 0), std::optional<std::string>(""));
  EXPECT_EQ(textAdded(decode, split, 3), std::nullopt);
}

TEST(SchedulerTest, RunnersWithoutOverlapGetTheSameOutput) {
  // The StepRunner defaults: each step runs inside launchStep, with one
  // micro-batch and with two.
  preemptionRun(false, 1);
  preemptionRun(false, 2);
}

TEST(SchedulerTest, MicroBatchesTakeTurnsWithTheSameOutput) {
  // A runner of two micro-batches (a two-stage pipeline): sequences split
  // between them, steps alternate, three steps in flight, tokens fed from
  // two steps back; with preemption, stop tokens and cancellation.
  FakeRunner runner(4, 12, 16, 60, {1, 2, 4, 8, 16, 32});
  runner.lanes = 2;
  Scheduler s(runner);
  std::mt19937 rng(21);
  std::vector<Collected> c(16);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> stops;
  for (int i = 0; i < 16; ++i) {
    prompts.push_back(randomPrompt(rng, 1 + int(rng() % 25)));
    Request r = makeRequest(prompts.back(), 20, c[size_t(i)]);
    if (i % 5 == 0) {
      stops.push_back(reference(prompts.back(), 20)[7]);
      r.stopTokens = {stops.back()};
    }
    ASSERT_TRUE(s.submit(std::move(r)).isOk());
  }
  ASSERT_TRUE(s.step().isOk());
  ASSERT_TRUE(s.step().isOk());
  s.cancel(4);
  ASSERT_TRUE(s.runUntilIdle().isOk());
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> ref = reference(prompts[size_t(i)], 20,
                                         i % 5 == 0 ? std::vector<int32_t>{stops[size_t(i / 5)]}
                                                    : std::vector<int32_t>{});
    if (i == 3) { // id 4: cancelled after two steps, a prefix of its output
      EXPECT_EQ(c[3].finish, Finish::Cancelled);
      EXPECT_TRUE(std::equal(c[3].tokens.begin(), c[3].tokens.end(), ref.begin()));
      continue;
    }
    EXPECT_EQ(c[size_t(i)].tokens, ref) << i;
    EXPECT_EQ(c[size_t(i)].finals, 1) << i;
  }
  EXPECT_EQ(runner.maxInFlight, 3);
  EXPECT_EQ(runner.maxFeedAge, 2);
  EXPECT_GT(s.stats().preemptions, 0u);
  EXPECT_EQ(runner.pagesHeld(), 0);
  EXPECT_EQ(s.stats().pagesFree, 60);
}

TEST(SchedulerTest, LogprobsOfEveryToken) {
  // The fake's logits are 1 at the next token and 0 elsewhere.
  FakeRunner runner(4, 2, 16, 32, {1, 2, 4, 8});
  Scheduler s(runner);
  std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  std::vector<Event> heard;
  Request r;
  r.prompt = prompt;
  r.maxTokens = 6;
  r.topLogprobs = 3;
  r.onEvent = [&](const Event &e) { heard.push_back(e); };
  ASSERT_TRUE(s.submit(std::move(r)).isOk());
  Request plain;
  plain.prompt = {9, 9};
  plain.maxTokens = 6;
  plain.onEvent = [&](const Event &e) { EXPECT_TRUE(e.topLogprobs.empty()); };
  ASSERT_TRUE(s.submit(std::move(plain)).isOk());
  ASSERT_TRUE(s.runUntilIdle().isOk());
  std::vector<int32_t> ref = reference(prompt, 6);
  ASSERT_EQ(heard.size(), 6u);
  float top = 1.0f - std::log(std::exp(1.0f) + float(kVocab - 1));
  float rest = -std::log(std::exp(1.0f) + float(kVocab - 1));
  for (size_t i = 0; i < heard.size(); ++i) {
    EXPECT_EQ(heard[i].token, ref[i]);
    EXPECT_NEAR(heard[i].logprob, top, 1e-4);
    ASSERT_EQ(heard[i].topLogprobs.size(), 3u);
    EXPECT_EQ(heard[i].topLogprobs[0].first, ref[i]);
    EXPECT_NEAR(heard[i].topLogprobs[0].second, top, 1e-4);
    EXPECT_NEAR(heard[i].topLogprobs[2].second, rest, 1e-4);
  }
  Request tooMany;
  tooMany.prompt = {1};
  tooMany.topLogprobs = kMaxTopLogprobs + 1;
  EXPECT_FALSE(s.submit(std::move(tooMany)).isOk());
}

TEST(SchedulerTest, RequestsThatCanNeverRunAreRefused) {
  FakeRunner runner(4, 2, 8, 6, {1, 2, 4});
  Scheduler s(runner);
  Collected c;
  auto refused = [&](Request r, const std::string &what) {
    StatusOr<uint64_t> id = s.submit(std::move(r));
    ASSERT_FALSE(id.isOk()) << what;
    EXPECT_NE(id.status().message().find(what), std::string::npos) << id.status().message();
  };
  refused(makeRequest({}, 4, c), "empty");
  refused(makeRequest({1, kVocab}, 4, c), "outside the vocabulary");
  refused(makeRequest({1, -2}, 4, c), "outside the vocabulary");
  refused(makeRequest({1, 2}, 0, c), "max_tokens");
  refused(makeRequest(std::vector<int32_t>(30, 1), 4, c), "context is 32"); // 33 positions
  refused(makeRequest(std::vector<int32_t>(20, 1), 8, c), "whole cache has 6"); // 7 pages
  Request sampled = makeRequest({1, 2}, 4, c);
  sampled.sampling.temperature = 0.7f;
  refused(std::move(sampled), "argmax");
  Request badTopP = makeRequest({1, 2}, 4, c);
  badTopP.sampling.topP = 0;
  refused(std::move(badTopP), "top_p");
  // Cancelling unknown ids, or twice, does nothing.
  s.cancel(12345);
  ASSERT_TRUE(s.submit(makeRequest({1, 2, 3}, 3, c)).isOk());
  ASSERT_TRUE(s.runUntilIdle().isOk());
  EXPECT_EQ(c.finish, Finish::Length);
  s.cancel(1);
  ASSERT_TRUE(s.step().isOk());
  EXPECT_EQ(c.finals, 1);
}

TEST(SchedulerTest, RunnerErrorsEndEveryRequest) {
  FakeRunner runner(4, 4, 8, 32, {1, 2, 4, 8});
  Scheduler s(runner);
  Collected a, b;
  ASSERT_TRUE(s.submit(makeRequest({1, 2, 3}, 8, a)).isOk());
  ASSERT_TRUE(s.step().isOk());
  ASSERT_TRUE(s.submit(makeRequest({4, 5}, 8, b)).isOk());
  runner.failNext = true;
  // A request that arrives while the failing step runs (another thread, in
  // a server) ends too: no later step would run it.
  Collected c, d;
  runner.duringFailure = [&] { ASSERT_TRUE(s.submit(makeRequest({6}, 8, c)).isOk()); };
  Status st = s.step();
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(a.finish, Finish::Cancelled);
  EXPECT_EQ(b.finish, Finish::Cancelled);
  EXPECT_EQ(c.finish, Finish::Cancelled);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.stats().pagesFree, 32);
  // And later ones are refused, saying why.
  StatusOr<uint64_t> late = s.submit(makeRequest({7}, 8, d));
  ASSERT_FALSE(late.isOk());
  EXPECT_EQ(late.status().code(), StatusCode::kInternal);
  EXPECT_NE(late.status().message().find("injected failure"), std::string::npos)
      << late.status().message();
}

} // namespace
} // namespace weft::serve

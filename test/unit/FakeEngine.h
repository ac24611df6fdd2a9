// A deterministic fake engine for server tests: the next token is a hash of
// the sequence so far, read back through the KV pages the scheduler gave
// it, so a request's output does not depend on what runs beside it.
#ifndef WEFT_TEST_UNIT_FAKEENGINE_H_
#define WEFT_TEST_UNIT_FAKEENGINE_H_

#include "runtime/serve/Step.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::testing {

// The byte-level fixture tokenizer the server tests use for text.
inline std::unique_ptr<tokenizer::Tokenizer> fixtureTokenizer() {
  StatusOr<tokenizer::Tokenizer> t = tokenizer::Tokenizer::fromFile(
      std::string(WEFT_FIXTURES_DIR) + "/tokenizers/byte_level_regex/tokenizer.json");
  if (!t.isOk())
    return nullptr;
  return std::make_unique<tokenizer::Tokenizer>(std::move(t.value()));
}

// Ids of the tokens that decode to one ASCII letter: a fake's output is
// then one byte a token.
inline std::vector<int32_t> letterTokens(const tokenizer::Tokenizer &tok) {
  std::vector<int32_t> letters;
  for (int32_t id = 0; id < tok.vocabSize(); ++id) {
    std::string t = tok.decode({id}, true);
    if (t.size() == 1 && std::isalpha(static_cast<unsigned char>(t[0])))
      letters.push_back(id);
  }
  return letters;
}

// `stepDelay` makes steps take time, for tests of load and disconnects.
class FakeEngine : public serve::StepRunner {
public:
  FakeEngine(int vocab, std::vector<int32_t> letters, int sequences, int pages,
             int blocksPerSequence = 64 /* context 256 */)
      : vocab_(vocab), letters_(std::move(letters)) {
    kv_.blockTokens = 4;
    kv_.maxSequences = sequences;
    kv_.maxBlocksPerSequence = blocksPerSequence;
    kv_.pages = pages;
    tables_.assign(size_t(sequences), {});
    cache_.assign(size_t(pages) * 4, -1);
  }
  const serve::KvLayout &kvLayout() const override { return kv_; }
  int vocabSize() const override { return vocab_; }
  bool samples() const override { return canSample; }
  std::vector<int> stepSizes() const override { return {1, 2, 4, 8, 16, 32, 64, 128, 256}; }
  Status setBlockTable(int slot, const std::vector<int32_t> &pages) override {
    std::lock_guard<std::mutex> l(m_);
    tables_[size_t(slot)] = pages;
    return Status::ok();
  }
  Status runStep(const serve::StepInputs &in, serve::StepOutputs &out) override {
    if (stepDelay.count())
      std::this_thread::sleep_for(stepDelay);
    if (failAtStep >= 0 && steps_++ >= failAtStep.load())
      return internalError("injected device fault");
    std::lock_guard<std::mutex> l(m_);
    for (size_t t = 0; t < in.ids.size(); ++t)
      if (in.slots[t] >= 0)
        *cell(in.slots[t], in.positions[t]) = in.ids[t];
    out.next.assign(in.ids.size(), 0);
    for (size_t t = 0; t < in.ids.size(); ++t) {
      if (in.slots[t] < 0)
        continue;
      uint64_t h = 1469598103934665603ull;
      for (int p = 0; p <= in.positions[t]; ++p)
        h = (h ^ uint64_t(*cell(in.slots[t], p))) * 1099511628211ull;
      // Only tokens that read as one ASCII letter: the text is easy to
      // reason about (one byte a token).
      out.next[t] = letters_[h % letters_.size()];
    }
    // Logits: 2 at the next token, 1 at the token after it, 0 elsewhere.
    out.logits.assign(in.logitRows.size() * size_t(vocab_), 0.0f);
    for (size_t i = 0; i < in.logitRows.size(); ++i) {
      int32_t next = out.next[size_t(in.logitRows[i])];
      out.logits[i * size_t(vocab_) + size_t(next)] = 2.0f;
      out.logits[i * size_t(vocab_) + size_t((next + 1) % vocab_)] = 1.0f;
    }
    return Status::ok();
  }
  int pagesInUse() {
    std::lock_guard<std::mutex> l(m_);
    int n = 0;
    for (const auto &t : tables_)
      n += int(t.size());
    return n;
  }
  std::chrono::milliseconds stepDelay{0};
  bool canSample = true; // false: an argmax plan (--sampling=false)
  // From this step on (counting from 0), runStep fails as a device would.
  std::atomic<int> failAtStep{-1};

private:
  int32_t *cell(int slot, int pos) {
    return &cache_[size_t(tables_[size_t(slot)][size_t(pos / 4)]) * 4 + size_t(pos % 4)];
  }
  std::mutex m_;
  std::atomic<int> steps_{0};
  int vocab_;
  std::vector<int32_t> letters_;
  serve::KvLayout kv_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> cache_;
};

} // namespace weft::testing

#endif // WEFT_TEST_UNIT_FAKEENGINE_H_

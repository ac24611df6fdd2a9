// Continuous batching over a plan's buckets: every step runs the next token
// of each running sequence together with chunks of waiting prompts (one
// chunk may hold several sequences), on a paged KV cache with admission by
// free pages, preemption by recomputation and cancellation at any time.
#ifndef WEFT_RUNTIME_SERVE_SCHEDULER_H_
#define WEFT_RUNTIME_SERVE_SCHEDULER_H_

#include "runtime/serve/PagePool.h"
#include "runtime/serve/Step.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace weft::serve {

// How the next token is chosen. Temperature 0 is greedy; above 0 the plan
// must sample, drawing from the softmax at that temperature restricted to
// the top_k most likely tokens (0: all) and to the smallest set whose
// probability reaches top_p. `seed` makes a request repeatable whatever
// else runs beside it.
struct SamplingParams {
  float temperature = 0;
  int32_t topK = 0;
  float topP = 1;
  uint64_t seed = 0;
  bool greedy() const { return !(temperature > 0) && topK <= 0 && !(topP < 1); }
};
// Checks the values (temperature >= 0 and finite, top_k >= 0, top_p in
// (0, 1]); an error names the bad one.
Status checkSampling(const SamplingParams &sampling);

inline constexpr int kMaxTopLogprobs = 20;

enum class Finish { None, Length, Stop, Cancelled };
const char *finishName(Finish f); // "length", "stop", "cancelled", ""

// What a request hears, on the thread that calls Scheduler::step.
struct Event {
  uint64_t id = 0;
  int32_t token = -1;         // the new token, or -1 (cancelled)
  int index = 0;              // its index among the request's output tokens
  Finish finish = Finish::None;
  int stopString = -1;        // which stop string ended the request
  // Logits of the last prompt token, with the first token, when asked for.
  const std::vector<float> *promptLogits = nullptr;
  // With Request::topLogprobs >= 0: the log-probability of `token` under
  // the model (the softmax of its logits, before temperature and top-k/p),
  // and the topLogprobs most likely tokens with theirs, most likely first.
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> topLogprobs;
  // With the first token: how many prompt tokens came from the prefix
  // cache instead of being computed (SchedulerOptions::prefixCaching).
  int cachedPromptTokens = 0;
};

struct Request {
  std::vector<int32_t> prompt;
  int maxTokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stopTokens;     // end the request (and are emitted)
  std::vector<std::string> stopStrings; // matched in the decoded output
  bool wantPromptLogits = false;
  // Log-probabilities with every token (see Event): -1 none, 0 the chosen
  // token's, N also the N most likely tokens' (at most kMaxTopLogprobs).
  int topLogprobs = -1;
  std::function<void(const Event &)> onEvent;
};

// Decodes a run of output tokens to text.
using DecodeTokens = std::function<std::string(const int32_t *tokens, size_t count)>;
// How many tokens before a new one are decoded with it to spell it as the
// whole output does (SentencePiece's leading spaces, characters split
// across tokens): stop strings and log-probabilities' token text.
constexpr size_t kTextContext = 4;
// What the last of `tokens` adds to the text of the ones before it, as
// `decode` spells them together; nullopt where it respells them (a
// character completed across tokens).
std::optional<std::string> textAdded(const DecodeTokens &decode, const int32_t *tokens,
                                     size_t count);

struct SchedulerOptions {
  // Most tokens in one step (0: the largest bucket). Smaller values cap the
  // prefill work a step adds to the decode tokens (latency of the others).
  int maxStepTokens = 0;
  // The text of a run of output tokens, for stop strings (none without
  // it). Each new token is decoded with up to kTextContext tokens before
  // it and its text is what it adds (textAdded), so that it reads as in
  // the whole text.
  DecodeTokens decode;
  // Prefix caching (PagePool): the KV blocks of whole blocks of tokens are
  // kept by content after their sequence ends, and a prompt that begins
  // with cached blocks shares their pages instead of prefilling them.
  bool prefixCaching = false;
};

struct SchedulerStats {
  int running = 0, waiting = 0;
  int pagesFree = 0, pagesTotal = 0;
  uint64_t steps = 0, preemptions = 0;
  std::map<int, uint64_t> stepsBySize; // steps launched, by token count
  uint64_t promptTokens = 0, generatedTokens = 0;
  // Prefix caching: admissions that looked the cache up, the prompt
  // tokens they took from it, pages holding cached blocks and those of
  // them no sequence uses (free to evict).
  uint64_t prefixQueries = 0, prefixHitTokens = 0;
  int cachedPages = 0, idleCachedPages = 0;
};

class Scheduler {
public:
  Scheduler(StepRunner &runner, SchedulerOptions options = {});
  ~Scheduler();

  // Queues a request; it joins at the next step. Refused here (never later)
  // when it can never run: an empty prompt, ids outside the vocabulary,
  // prompt + max_tokens beyond the plan's context or its whole KV cache,
  // bad sampling values, or sampling on a plan that only takes the argmax.
  // Thread-safe.
  StatusOr<uint64_t> submit(Request request);
  // Ends a request at the next step and frees its pages; it hears one last
  // event with Finish::Cancelled. Unknown or finished ids: no-op.
  // Thread-safe.
  void cancel(uint64_t id);

  // Launches the next step (admitting and preempting sequences for it),
  // then waits for the step launched before and hands out its tokens, so
  // the host builds step n+1 while the GPU runs step n. A decode token
  // whose predecessor is still on the GPU is taken from there (StepInputs::
  // feed); a sequence that stops on that predecessor wastes the one row.
  // With a runner of several micro-batches (pipeline stages), each
  // sequence belongs to one, steps serve them in turn, and as many steps
  // as there are stages stay in flight.
  // Does nothing when there is no work. An error from the runner ends
  // every request (their last event is Cancelled) and is returned; from
  // then on failure() holds it and submit() refuses with it.
  Status step();
  // Ok until a step fails; then why (already set when the requests hear
  // Cancelled, so their handlers can tell a failure from a cancel).
  Status failure() const;
  // Steps until every request has finished.
  Status runUntilIdle();
  // No request queued, running or waiting, and no step on the GPU.
  bool idle() const;
  SchedulerStats stats() const;

private:
  struct Sequence;
  struct Launched;
  void drainInbox();
  bool buildStep(int lane, StepInputs &in, Launched &launched);
  void hear(const Launched &launched, const StepOutputs &out);
  Status fail(Status error);
  void finish(Sequence &s, Finish why, int stopString = -1);
  void release(Sequence &s);
  void preempt(Sequence &s);
  bool reservePages(Sequence &s, size_t positions);
  // Hands the sequence's whole blocks of its first `computed` positions to
  // the prefix cache.
  void publishBlocks(Sequence &s, size_t computed);
  // The stop string the sequence's newest token completes, or -1.
  int matchStop(Sequence &s);

  StepRunner &runner_;
  SchedulerOptions options_;
  KvLayout kv_;
  std::vector<int> sizes_;
  int maxStep_ = 0;
  PagePool pool_;
  std::vector<int> freeSlots_;

  mutable std::mutex inboxMutex_;
  // After a failed step: why. Later submissions are refused with it, since
  // no step will run them (under inboxMutex_).
  Status failure_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  std::vector<uint64_t> cancels_;
  uint64_t nextId_ = 1;

  // Admitted sequences by arrival (oldest first), and the waiting ones.
  std::vector<std::unique_ptr<Sequence>> running_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  // Steps launched and not yet heard, oldest first.
  std::deque<Launched> launched_;
  uint64_t launches_ = 0;
  // Micro-batches (the runner's pipeline stages): each sequence joins the
  // steps of one; steps take them in turn.
  int lanes_ = 1, nextLane_ = 0;
  std::atomic<int> inFlight_{0};
  SchedulerStats stats_;
};

} // namespace weft::serve

#endif // WEFT_RUNTIME_SERVE_SCHEDULER_H_

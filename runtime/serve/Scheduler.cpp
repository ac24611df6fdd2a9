// Continuous batching: which tokens go into each step, and what happens to
// the sequences around it.
#include "runtime/serve/Scheduler.h"

#include <algorithm>
#include <cmath>

namespace weft::serve {

Status checkSampling(const SamplingParams &s) {
  if (!(s.temperature >= 0) || std::isinf(s.temperature))
    return invalidArgument("temperature " + std::to_string(s.temperature) +
                           ": expected a finite number >= 0");
  if (s.topK < 0)
    return invalidArgument("top_k " + std::to_string(s.topK) + ": expected >= 0 (0: off)");
  if (!(s.topP > 0 && s.topP <= 1))
    return invalidArgument("top_p " + std::to_string(s.topP) + ": expected a number in (0, 1]");
  return Status::ok();
}

const char *finishName(Finish f) {
  switch (f) {
  case Finish::Length: return "length";
  case Finish::Stop: return "stop";
  case Finish::Cancelled: return "cancelled";
  case Finish::None: return "";
  }
  return "";
}

struct Scheduler::Sequence {
  uint64_t id = 0;
  Request req;
  std::vector<int32_t> tokens; // the prompt, then every output token
  int generated = 0;
  size_t cached = 0;           // leading positions already in the KV cache
  int slot = -1;
  std::vector<int32_t> pages;
  size_t published = 0;        // leading blocks handed to the prefix cache
  int cachedPrompt = -1;       // prompt tokens its first admission took from the cache
  std::string text;            // decoded output, for stop strings
  std::vector<float> promptLogits;
  bool cancelled = false;
  // Tokens sampled by launched steps and not heard yet (at most one per
  // step in flight), and the row of the latest in its step.
  int pending = 0;
  int32_t pendingRow = -1;
  uint64_t pendingLaunch = 0; // the launch (numbered from 0) of that step
  int lane = 0;               // the micro-batch whose steps it joins
  uint32_t epoch = 0; // bumped by preemption: rows launched before are dropped
};

namespace {
int ceilDiv(size_t a, int b) { return int((a + size_t(b) - 1) / size_t(b)); }
} // namespace

Scheduler::Scheduler(StepRunner &runner, SchedulerOptions options)
    : runner_(runner), options_(std::move(options)), kv_(runner.kvLayout()),
      sizes_(runner.stepSizes()),
      pool_(runner.kvLayout().pages, runner.kvLayout().blockTokens, options_.prefixCaching) {
  maxStep_ = sizes_.empty() ? 0 : sizes_.back();
  lanes_ = std::max(1, runner.microBatches());
  if (options_.maxStepTokens > 0)
    maxStep_ = std::min(maxStep_, options_.maxStepTokens);
  for (int s = kv_.maxSequences - 1; s >= 0; --s)
    freeSlots_.push_back(s);
}

Scheduler::~Scheduler() = default;

StatusOr<uint64_t> Scheduler::submit(Request request) {
  if (request.prompt.empty())
    return invalidArgument("the prompt is empty");
  if (request.topLogprobs < -1 || request.topLogprobs > kMaxTopLogprobs)
    return invalidArgument("top_logprobs " + std::to_string(request.topLogprobs) +
                           ": expected 0 to " + std::to_string(kMaxTopLogprobs));
  if (request.maxTokens < 1)
    return invalidArgument("max_tokens " + std::to_string(request.maxTokens) +
                           ": expected at least 1");
  int vocab = runner_.vocabSize();
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab)
      return invalidArgument("prompt token " + std::to_string(i) + " is " +
                             std::to_string(request.prompt[i]) +
                             ", outside the vocabulary of " + std::to_string(vocab));
  // The last output token is never fed back: prompt + max_tokens - 1
  // positions at most.
  uint64_t positions = request.prompt.size() + uint64_t(request.maxTokens) - 1;
  if (positions > uint64_t(kv_.maxContext()))
    return invalidArgument("a prompt of " + std::to_string(request.prompt.size()) +
                           " tokens and max_tokens " + std::to_string(request.maxTokens) +
                           " need " + std::to_string(positions) +
                           " positions; the plan's context is " +
                           std::to_string(kv_.maxContext()));
  if (uint64_t(ceilDiv(positions, kv_.blockTokens)) > uint64_t(kv_.pages))
    return invalidArgument("a sequence of " + std::to_string(positions) + " positions needs " +
                           std::to_string(ceilDiv(positions, kv_.blockTokens)) +
                           " KV pages; the plan's whole cache has " + std::to_string(kv_.pages));
  WEFT_RETURN_IF_ERROR(checkSampling(request.sampling));
  if (!request.sampling.greedy() && !runner_.samples())
    return failedPrecondition("the plan picks tokens by argmax (compiled with "
                              "--sampling=false): it cannot sample");
  if (sizes_.empty() || kv_.maxSequences < 1)
    return failedPrecondition("the plan has no buckets or no sequences");
  auto s = std::make_unique<Sequence>();
  s->req = std::move(request);
  s->tokens = s->req.prompt;
  std::lock_guard<std::mutex> lock(inboxMutex_);
  if (!failure_.isOk())
    return internalError("the engine failed and runs no more steps: " + failure_.message());
  s->id = nextId_++;
  uint64_t id = s->id;
  inbox_.push_back(std::move(s));
  return id;
}

void Scheduler::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(inboxMutex_);
  cancels_.push_back(id);
}

bool Scheduler::idle() const {
  std::lock_guard<std::mutex> lock(inboxMutex_);
  return inbox_.empty() && running_.empty() && waiting_.empty() && inFlight_ == 0;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.running = int(running_.size());
  s.waiting = int(waiting_.size());
  s.pagesFree = pool_.available();
  s.pagesTotal = pool_.total();
  s.cachedPages = pool_.cachedPages();
  s.idleCachedPages = pool_.idleCachedPages();
  return s;
}

void Scheduler::drainInbox() {
  std::vector<std::unique_ptr<Sequence>> arrived;
  std::vector<uint64_t> cancels;
  {
    std::lock_guard<std::mutex> lock(inboxMutex_);
    arrived.swap(inbox_);
    cancels.swap(cancels_);
  }
  for (auto &s : arrived) {
    stats_.promptTokens += s->req.prompt.size();
    waiting_.push_back(std::move(s));
  }
  for (uint64_t id : cancels) {
    for (auto &s : running_)
      if (s->id == id)
        s->cancelled = true;
    for (auto &s : waiting_)
      if (s->id == id)
        s->cancelled = true;
  }
  // Cancelled sequences leave at once, their pages with them.
  auto drop = [&](auto &list) {
    for (auto it = list.begin(); it != list.end();) {
      if ((*it)->cancelled) {
        release(**it);
        finish(**it, Finish::Cancelled);
        it = list.erase(it);
      } else {
        ++it;
      }
    }
  };
  drop(running_);
  drop(waiting_);
}

void Scheduler::finish(Sequence &s, Finish why, int stopString) {
  if (!s.req.onEvent)
    return;
  Event e;
  e.id = s.id;
  e.finish = why;
  e.stopString = stopString;
  e.index = s.generated;
  s.req.onEvent(e);
}

void Scheduler::release(Sequence &s) {
  if (s.slot < 0)
    return;
  pool_.give(s.pages);
  // An empty row: the engine refuses any later token of this slot until
  // it has pages again.
  (void)runner_.setBlockTable(s.slot, {});
  freeSlots_.push_back(s.slot);
  s.slot = -1;
  s.cached = 0;
  s.published = 0;
  s.pending = 0;
  ++s.epoch;
}

void Scheduler::publishBlocks(Sequence &s, size_t computed) {
  // A block whose positions are all computed by steps launched so far (or
  // by the step being built: within a step, every layer writes the keys
  // and values of all its rows before any row attends) and whose tokens
  // are all known (a fed token is heard a step later).
  size_t whole = std::min(computed, s.tokens.size()) / size_t(kv_.blockTokens);
  for (; s.published < whole && s.published < s.pages.size(); ++s.published)
    pool_.publish(s.pages, s.published, s.tokens.data());
}

bool Scheduler::reservePages(Sequence &s, size_t positions) {
  int need = ceilDiv(positions, kv_.blockTokens) - int(s.pages.size());
  if (need <= 0)
    return true;
  if (!pool_.take(need, s.pages))
    return false;
  return runner_.setBlockTable(s.slot, s.pages).isOk();
}

void Scheduler::preempt(Sequence &s) {
  // Recomputation: the pages go back now; the prompt and the output so far
  // are prefilled again when the sequence is readmitted (oldest first).
  release(s);
  ++stats_.preemptions;
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Sequence> &p) { return p.get() == &s; });
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const std::unique_ptr<Sequence> &w) { return w->id > owned->id; });
  waiting_.insert(pos, std::move(owned));
}

std::optional<std::string> textAdded(const DecodeTokens &decode, const int32_t *tokens,
                                     size_t count) {
  if (count == 0)
    return std::string();
  const std::string before = decode(tokens, count - 1), after = decode(tokens, count);
  if (after.compare(0, before.size(), before) != 0)
    return std::nullopt;
  return after.substr(before.size());
}

int Scheduler::matchStop(Sequence &s) {
  if (s.req.stopStrings.empty() || !options_.decode)
    return -1;
  const int32_t *out = s.tokens.data() + (s.tokens.size() - size_t(s.generated));
  const size_t n = size_t(s.generated);
  const size_t window = n > kTextContext + 1 ? n - kTextContext - 1 : 0;
  std::string piece;
  if (std::optional<std::string> added = textAdded(options_.decode, out + window, n - window)) {
    piece = std::move(*added);
    s.text += piece;
  } else {
    // The new token respelled the ones before it (a character completed):
    // the whole output again, every stop searched anew.
    s.text = options_.decode(out, n);
    piece = s.text;
  }
  for (size_t k = 0; k < s.req.stopStrings.size(); ++k) {
    const std::string &stop = s.req.stopStrings[k];
    if (stop.empty())
      continue;
    // Only a match that ends in the new piece is new.
    size_t from = s.text.size() > piece.size() + stop.size() - 1
                      ? s.text.size() - piece.size() - stop.size() + 1
                      : 0;
    if (s.text.find(stop, from) != std::string::npos)
      return int(k);
  }
  return -1;
}

// Which rows of a launched step give which sequence its next token.
struct Scheduler::Launched {
  struct Output {
    uint64_t id;
    uint32_t epoch;    // the sequence's epoch at launch: a preempted one drops it
    size_t row;
    int logitIndex;    // its row among the step's logits, or -1
  };
  std::vector<Output> outputs;
};

namespace {

// A request's uniform draw for its output `index`: a function of its seed
// and the index only, so a token recomputed after a preemption, or beside
// other requests, draws the same number.
float uniformAt(uint64_t seed, uint64_t index) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return float(mix(seed ^ mix(index)) >> 40) * 0x1.0p-24f;
}

// log softmax(logits)[token], and the `top` most likely tokens with theirs.
void logprobsOf(const float *logits, size_t vocab, int32_t token, int top, Event &e) {
  float max = logits[0];
  for (size_t i = 1; i < vocab; ++i)
    max = std::max(max, logits[i]);
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i)
    sum += std::exp(double(logits[i] - max));
  float logSum = float(std::log(sum)) + max;
  e.logprob = logits[size_t(token)] - logSum;
  if (top <= 0)
    return;
  // A min-heap of the best `top` so far: one pass over the vocabulary.
  using Entry = std::pair<float, int32_t>;
  std::vector<Entry> heap;
  auto greater = [](const Entry &a, const Entry &b) { return a.first > b.first; };
  for (size_t i = 0; i < vocab; ++i) {
    if (heap.size() < size_t(top)) {
      heap.push_back({logits[i], int32_t(i)});
      std::push_heap(heap.begin(), heap.end(), greater);
    } else if (logits[i] > heap.front().first) {
      std::pop_heap(heap.begin(), heap.end(), greater);
      heap.back() = {logits[i], int32_t(i)};
      std::push_heap(heap.begin(), heap.end(), greater);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), greater);
  for (const Entry &x : heap)
    e.topLogprobs.push_back({x.second, x.first - logSum});
}

} // namespace

bool Scheduler::buildStep(int lane, StepInputs &in, Launched &launched) {
  if (running_.empty() && waiting_.empty())
    return false;
  struct Part {
    Sequence *seq;
    size_t begin, count;
    bool fed; // one decode token whose id is still on the GPU
  };
  std::vector<Part> parts;
  int budget = maxStep_;

  // 1. One token for every sequence that is decoding, oldest first: the
  //    last token heard, or the one the step on the GPU is sampling. A
  //    token that needs a page when none is free preempts the newest
  //    sequence (itself, if it is the newest).
  std::vector<Sequence *> byAge;
  for (auto &s : running_)
    byAge.push_back(s.get());
  std::sort(byAge.begin(), byAge.end(), [](Sequence *a, Sequence *b) { return a->id < b->id; });
  for (Sequence *s : byAge) {
    if (s->lane != lane || s->slot < 0 ||
        s->tokens.size() + size_t(s->pending) - s->cached != 1 || budget == 0)
      continue;
    if (s->generated + s->pending >= s->req.maxTokens)
      continue; // the token on the GPU is its last
    while (!reservePages(*s, s->cached + 1)) {
      Sequence *victim = nullptr;
      for (auto &r : running_)
        if (!victim || r->id > victim->id)
          victim = r.get();
      // Tokens already placed in this step keep their pages: drop the
      // victim's part first.
      parts.erase(std::remove_if(parts.begin(), parts.end(),
                                 [&](const Part &p) {
                                   if (p.seq != victim)
                                     return false;
                                   budget += int(p.count);
                                   return true;
                                 }),
                  parts.end());
      preempt(*victim);
      if (victim == s)
        break;
    }
    if (s->slot < 0)
      break; // s was the newest: everything after it is gone too
    parts.push_back({s, s->cached, 1, s->pending > 0});
    --budget;
  }

  // 2. Prompt chunks of admitted sequences, oldest first (their pages were
  //    reserved at admission).
  for (Sequence *s : byAge) {
    if (budget == 0)
      break;
    if (s->lane != lane || s->slot < 0 || s->pending > 0 || s->tokens.size() - s->cached <= 1)
      continue;
    size_t n = std::min(s->tokens.size() - s->cached, size_t(budget));
    parts.push_back({s, s->cached, n, false});
    publishBlocks(*s, s->cached + n); // admissions below may share them
    budget -= int(n);
  }

  // 3. Admission in arrival order: a free slot and pages for the whole
  //    context so far (prompt, and output before a preemption).
  //    With prefix caching, the longest run of cached whole blocks its
  //    tokens begin with is shared, not computed (at least its last token
  //    is: the step must sample after it).
  while (budget > 0 && !waiting_.empty() && !freeSlots_.empty()) {
    Sequence &s = *waiting_.front();
    int need = ceilDiv(s.tokens.size(), kv_.blockTokens);
    int shareable = int((s.tokens.size() - 1) / size_t(kv_.blockTokens)), idle = 0;
    int hit = pool_.lookup(s.tokens.data(), s.tokens.size(), shareable, &idle);
    if (pool_.available() - idle < need - hit)
      break; // first come, first served: no overtaking
    s.slot = freeSlots_.back();
    freeSlots_.pop_back();
    pool_.takeCached(s.tokens.data(), s.tokens.size(), hit, s.pages);
    if (!reservePages(s, s.tokens.size())) {
      pool_.give(s.pages);
      freeSlots_.push_back(s.slot);
      s.slot = -1;
      break;
    }
    s.cached = size_t(hit) * size_t(kv_.blockTokens);
    s.published = size_t(hit);
    if (pool_.prefixCaching()) {
      ++stats_.prefixQueries;
      stats_.prefixHitTokens += s.cached;
    }
    if (s.cachedPrompt < 0)
      s.cachedPrompt = int(std::min(s.cached, s.req.prompt.size()));
    size_t n = std::min(s.tokens.size() - s.cached, size_t(budget));
    s.lane = lane;
    parts.push_back({&s, s.cached, n, false});
    publishBlocks(s, s.cached + n); // the next admission may share them
    budget -= int(n);
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  if (parts.empty())
    return false;

  // The step: parts in order, each sequence's tokens adjacent, padded to
  // the smallest bucket that holds them.
  size_t used = 0;
  for (const Part &p : parts)
    used += p.count;
  int size = sizes_.back();
  for (int z : sizes_)
    if (size_t(z) >= used) {
      size = z;
      break;
    }
  bool sampling = runner_.samples();
  bool anyFed = false;
  in.ids.reserve(size_t(size));
  for (const Part &p : parts) {
    Sequence &s = *p.seq;
    s.cached += p.count; // positions are taken at launch
    publishBlocks(s, s.cached);
    for (size_t i = p.begin; i < p.begin + p.count; ++i) {
      // Its output is the sequence's next token: the position after the
      // last one heard or on the GPU.
      bool last = i + 1 == s.tokens.size() + size_t(s.pending);
      int output = s.generated + s.pending; // the index of that token
      in.ids.push_back(p.fed ? 0 : s.tokens[i]);
      in.feed.push_back(p.fed ? s.pendingRow : -1);
      in.feedAge.push_back(p.fed ? int32_t(launches_ - s.pendingLaunch) : 1);
      anyFed |= p.fed;
      in.positions.push_back(int32_t(i));
      in.slots.push_back(s.slot);
      if (sampling) {
        const SamplingParams &sp = s.req.sampling;
        in.temperature.push_back(last ? sp.temperature : 0.0f);
        in.topK.push_back(last ? sp.topK : 0);
        in.topP.push_back(last ? sp.topP : 1.0f);
        in.uniform.push_back(last && !sp.greedy() ? uniformAt(sp.seed, uint64_t(output)) : 0.0f);
      }
      if (last) {
        int logitIndex = -1;
        if ((s.req.wantPromptLogits && output == 0) || s.req.topLogprobs >= 0) {
          logitIndex = int(in.logitRows.size());
          in.logitRows.push_back(int32_t(in.ids.size() - 1));
        }
        launched.outputs.push_back({s.id, s.epoch, in.ids.size() - 1, logitIndex});
        ++s.pending; // the part's last row: nothing below reads it again
        s.pendingRow = int32_t(in.ids.size() - 1);
        s.pendingLaunch = launches_;
      }
    }
  }
  while (in.ids.size() < size_t(size)) {
    in.ids.push_back(0);
    in.feed.push_back(-1);
    in.feedAge.push_back(1);
    in.positions.push_back(0);
    in.slots.push_back(kPaddingSlot);
    if (sampling) {
      in.temperature.push_back(0.0f);
      in.topK.push_back(0);
      in.topP.push_back(1.0f);
      in.uniform.push_back(0.0f);
    }
  }
  if (!anyFed) {
    in.feed.clear();
    in.feedAge.clear();
  }
  return true;
}

void Scheduler::hear(const Launched &launched, const StepOutputs &out) {
  std::map<uint64_t, Sequence *> live;
  for (auto &s : running_)
    live[s->id] = s.get();
  size_t vocab = size_t(runner_.vocabSize());
  std::vector<Sequence *> done;
  for (const Launched::Output &o : launched.outputs) {
    auto it = live.find(o.id);
    // Gone (finished, cancelled) or preempted since: the row is dropped.
    if (it == live.end() || it->second->epoch != o.epoch || o.row >= out.next.size())
      continue;
    Sequence &s = *it->second;
    s.pending = std::max(0, s.pending - 1);
    int32_t token = out.next[o.row];
    Event e;
    e.id = s.id;
    e.token = token;
    e.index = s.generated;
    const float *logits = nullptr;
    if (o.logitIndex >= 0 && out.logits.size() >= size_t(o.logitIndex + 1) * vocab)
      logits = out.logits.data() + size_t(o.logitIndex) * vocab;
    if (logits && s.req.wantPromptLogits && s.generated == 0) {
      s.promptLogits.assign(logits, logits + vocab);
      e.promptLogits = &s.promptLogits;
    }
    if (logits && s.req.topLogprobs >= 0 && token >= 0 && size_t(token) < vocab)
      logprobsOf(logits, vocab, token, std::min(s.req.topLogprobs, kMaxTopLogprobs), e);
    if (s.generated == 0)
      e.cachedPromptTokens = std::max(s.cachedPrompt, 0);
    s.tokens.push_back(token);
    ++s.generated;
    ++stats_.generatedTokens;
    publishBlocks(s, s.cached);
    int stopString = matchStop(s);
    if (std::find(s.req.stopTokens.begin(), s.req.stopTokens.end(), token) !=
        s.req.stopTokens.end())
      e.finish = Finish::Stop;
    else if (stopString >= 0)
      e.finish = Finish::Stop, e.stopString = stopString;
    else if (s.generated >= s.req.maxTokens)
      e.finish = Finish::Length;
    if (s.req.onEvent)
      s.req.onEvent(e);
    if (e.finish != Finish::None)
      done.push_back(&s);
  }
  // A step on the GPU may still write a finished sequence's next position
  // into its pages: later steps, which may reuse them, run after it.
  for (Sequence *s : done) {
    release(*s);
    running_.erase(std::find_if(running_.begin(), running_.end(),
                                [&](const std::unique_ptr<Sequence> &p) { return p.get() == s; }));
  }
}

Status Scheduler::fail(Status error) {
  if (error.isOk())
    error = internalError("a step failed");
  {
    // First, so that whoever hears Cancelled below can ask why.
    std::lock_guard<std::mutex> lock(inboxMutex_);
    failure_ = error;
  }
  StepOutputs ignored;
  while (!launched_.empty()) {
    (void)runner_.waitStep(ignored);
    launched_.pop_front();
  }
  inFlight_ = 0;
  for (auto &s : running_) {
    release(*s);
    finish(*s, Finish::Cancelled);
  }
  for (auto &s : waiting_)
    finish(*s, Finish::Cancelled);
  running_.clear();
  waiting_.clear();
  // Requests that arrived during the failed step, and none after it: no
  // step will run them, and their callers wait for an end.
  std::vector<std::unique_ptr<Sequence>> arrived;
  {
    std::lock_guard<std::mutex> lock(inboxMutex_);
    arrived.swap(inbox_);
    cancels_.clear();
  }
  for (auto &s : arrived)
    finish(*s, Finish::Cancelled);
  return error;
}

Status Scheduler::failure() const {
  std::lock_guard<std::mutex> lock(inboxMutex_);
  return failure_;
}

Status Scheduler::step() {
  drainInbox();
  // The next micro-batch with work, in turn.
  StepInputs in;
  Launched next;
  bool launch = false;
  for (int k = 0; k < lanes_ && !launch; ++k) {
    int lane = (nextLane_ + k) % lanes_;
    in = StepInputs();
    next = Launched();
    if (buildStep(lane, in, next)) {
      launch = true;
      nextLane_ = (lane + 1) % lanes_;
    }
  }
  if (launch) {
    Status st = runner_.launchStep(in);
    ++launches_;
    ++stats_.steps;
    ++stats_.stepsBySize[int(in.ids.size())];
    if (!st.isOk())
      return fail(st);
    launched_.push_back(std::move(next));
    inFlight_ = int(launched_.size());
  }
  // Hear the oldest step once `lanes_` newer ones keep the GPU busy (all of
  // them when there was nothing to launch).
  while (launched_.size() > (launch ? size_t(lanes_) : 0u)) {
    StepOutputs out;
    Status st = runner_.waitStep(out);
    if (!st.isOk())
      return fail(st);
    Launched heard = std::move(launched_.front());
    launched_.pop_front();
    inFlight_ = int(launched_.size());
    hear(heard, out);
  }
  return Status::ok();
}

Status Scheduler::runUntilIdle() {
  while (!idle())
    WEFT_RETURN_IF_ERROR(step());
  return Status::ok();
}

} // namespace weft::serve

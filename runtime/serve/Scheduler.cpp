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
  std::mt19937_64 rng;
  std::string text;            // decoded output, for stop strings
  std::vector<float> promptLogits;
  bool cancelled = false;
};

namespace {
int ceilDiv(size_t a, int b) { return int((a + size_t(b) - 1) / size_t(b)); }
} // namespace

Scheduler::Scheduler(StepRunner &runner, SchedulerOptions options)
    : runner_(runner), options_(std::move(options)), kv_(runner.kvLayout()),
      sizes_(runner.stepSizes()), pool_(runner.kvLayout().pages) {
  maxStep_ = sizes_.empty() ? 0 : sizes_.back();
  if (options_.maxStepTokens > 0)
    maxStep_ = std::min(maxStep_, options_.maxStepTokens);
  for (int s = kv_.maxSequences - 1; s >= 0; --s)
    freeSlots_.push_back(s);
}

Scheduler::~Scheduler() = default;

StatusOr<uint64_t> Scheduler::submit(Request request) {
  if (request.prompt.empty())
    return invalidArgument("the prompt is empty");
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
  s->rng.seed(s->req.sampling.seed);
  std::lock_guard<std::mutex> lock(inboxMutex_);
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
  return inbox_.empty() && running_.empty() && waiting_.empty();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.running = int(running_.size());
  s.waiting = int(waiting_.size());
  s.pagesFree = pool_.available();
  s.pagesTotal = pool_.total();
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

int Scheduler::matchStop(Sequence &s, int32_t token) {
  if (s.req.stopStrings.empty() || !options_.tokenText)
    return -1;
  std::string piece = options_.tokenText(token);
  s.text += piece;
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

Status Scheduler::step() {
  drainInbox();
  if (running_.empty() && waiting_.empty())
    return Status::ok();

  struct Part {
    Sequence *seq;
    size_t begin, count;
  };
  std::vector<Part> parts;
  int budget = maxStep_;

  // 1. One token for every sequence that is decoding, oldest first. A token
  //    that needs a page when none is free preempts the newest sequence
  //    (itself, if it is the newest).
  std::vector<Sequence *> byAge;
  for (auto &s : running_)
    byAge.push_back(s.get());
  std::sort(byAge.begin(), byAge.end(), [](Sequence *a, Sequence *b) { return a->id < b->id; });
  std::vector<Sequence *> preempted;
  for (Sequence *s : byAge) {
    if (s->slot < 0 || s->tokens.size() - s->cached != 1 || budget == 0)
      continue;
    while (!reservePages(*s, s->tokens.size())) {
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
    parts.push_back({s, s->cached, 1});
    --budget;
  }

  // 2. Prompt chunks of admitted sequences, oldest first (their pages were
  //    reserved at admission).
  for (Sequence *s : byAge) {
    if (budget == 0)
      break;
    if (s->slot < 0 || s->tokens.size() - s->cached <= 1)
      continue;
    size_t n = std::min(s->tokens.size() - s->cached, size_t(budget));
    parts.push_back({s, s->cached, n});
    budget -= int(n);
  }

  // 3. Admission in arrival order: a free slot and pages for the whole
  //    context so far (prompt, and output before a preemption).
  while (budget > 0 && !waiting_.empty() && !freeSlots_.empty()) {
    Sequence &s = *waiting_.front();
    int need = ceilDiv(s.tokens.size(), kv_.blockTokens);
    if (pool_.available() < need)
      break; // first come, first served: no overtaking
    s.slot = freeSlots_.back();
    freeSlots_.pop_back();
    if (!reservePages(s, s.tokens.size())) {
      freeSlots_.push_back(s.slot);
      s.slot = -1;
      break;
    }
    size_t n = std::min(s.tokens.size(), size_t(budget));
    parts.push_back({&s, 0, n});
    budget -= int(n);
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  if (parts.empty())
    return Status::ok();

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
  StepInputs in;
  in.ids.reserve(size_t(size));
  bool wantLogits = false;
  std::vector<size_t> outputRow(parts.size(), SIZE_MAX);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (size_t pi = 0; pi < parts.size(); ++pi) {
    const Part &p = parts[pi];
    Sequence &s = *p.seq;
    for (size_t i = p.begin; i < p.begin + p.count; ++i) {
      bool last = i + 1 == s.tokens.size(); // its output is the next token
      in.ids.push_back(s.tokens[i]);
      in.positions.push_back(int32_t(i));
      in.slots.push_back(s.slot);
      if (sampling) {
        const SamplingParams &sp = s.req.sampling;
        in.temperature.push_back(last ? sp.temperature : 0.0f);
        in.topK.push_back(last ? sp.topK : 0);
        in.topP.push_back(last ? sp.topP : 1.0f);
        in.uniform.push_back(last && !sp.greedy() ? unit(s.rng) : 0.0f);
      }
      if (last) {
        outputRow[pi] = in.ids.size() - 1;
        wantLogits |= s.req.wantPromptLogits && s.generated == 0;
      }
    }
  }
  while (in.ids.size() < size_t(size)) {
    in.ids.push_back(0);
    in.positions.push_back(0);
    in.slots.push_back(kPaddingSlot);
    if (sampling) {
      in.temperature.push_back(0.0f);
      in.topK.push_back(0);
      in.topP.push_back(1.0f);
      in.uniform.push_back(0.0f);
    }
  }

  StepOutputs out;
  Status st = runner_.runStep(in, wantLogits, out);
  ++stats_.steps;
  if (!st.isOk()) {
    for (auto &s : running_) {
      release(*s);
      finish(*s, Finish::Cancelled);
    }
    for (auto &s : waiting_)
      finish(*s, Finish::Cancelled);
    running_.clear();
    waiting_.clear();
    return st;
  }

  // Results: every sequence whose context is now cached has a new token.
  size_t vocab = size_t(runner_.vocabSize());
  std::vector<Sequence *> done;
  for (size_t pi = 0; pi < parts.size(); ++pi) {
    Sequence &s = *parts[pi].seq;
    s.cached += parts[pi].count;
    if (outputRow[pi] == SIZE_MAX)
      continue;
    size_t row = outputRow[pi];
    int32_t token = out.next[row];
    Event e;
    e.id = s.id;
    e.token = token;
    e.index = s.generated;
    if (s.req.wantPromptLogits && s.generated == 0 && out.logits.size() >= (row + 1) * vocab) {
      s.promptLogits.assign(out.logits.begin() + long(row * vocab),
                            out.logits.begin() + long((row + 1) * vocab));
      e.promptLogits = &s.promptLogits;
    }
    s.tokens.push_back(token);
    ++s.generated;
    ++stats_.generatedTokens;
    int stopString = matchStop(s, token);
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
  for (Sequence *s : done) {
    release(*s);
    running_.erase(std::find_if(running_.begin(), running_.end(),
                                [&](const std::unique_ptr<Sequence> &p) { return p.get() == s; }));
  }
  return Status::ok();
}

Status Scheduler::runUntilIdle() {
  while (!idle())
    WEFT_RETURN_IF_ERROR(step());
  return Status::ok();
}

} // namespace weft::serve

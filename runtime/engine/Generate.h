// Generation for one sequence over an Engine (greedy or sampled), as one
// request through the scheduler: the prompt in chunks of the largest
// bucket, then one token per step.
#ifndef WEFT_RUNTIME_ENGINE_GENERATE_H_
#define WEFT_RUNTIME_ENGINE_GENERATE_H_

#include "runtime/engine/Engine.h"
#include "runtime/serve/Scheduler.h"

#include <functional>

namespace weft::engine {

struct Generation {
  std::vector<int32_t> tokens;          // generated, after the prompt
  std::vector<float> promptLogits;      // logits of the last prompt token
  double prefillSeconds = 0;            // until the first token
  double decodeSeconds = 0;             // all decode steps
  int decodeSteps = 0;
  int cachedPromptTokens = 0;           // taken from the prefix cache
};

// How the next token is chosen (see serve::SamplingParams).
using SamplingOptions = serve::SamplingParams;
using serve::checkSampling;
// The values, and that the plan can sample when the options ask for it.
Status checkSampling(const Engine &engine, const SamplingOptions &sampling);

// `onToken`, when given, hears each generated token as soon as its step
// ends (to stream it).
StatusOr<Generation> generate(Engine &engine, const std::vector<int32_t> &prompt,
                              int maxTokens, const std::vector<int32_t> &stopTokens,
                              const SamplingOptions &sampling,
                              const std::function<void(int32_t)> &onToken = {});

// The same through `scheduler` (over `engine`), which keeps its state
// between calls: with SchedulerOptions::prefixCaching, a later prompt that
// begins as an earlier sequence did (a conversation's next turn) shares
// the KV blocks computed for it. `scheduler` must be idle.
StatusOr<Generation> generate(serve::Scheduler &scheduler, Engine &engine,
                              const std::vector<int32_t> &prompt, int maxTokens,
                              const std::vector<int32_t> &stopTokens,
                              const SamplingOptions &sampling,
                              const std::function<void(int32_t)> &onToken = {});

inline StatusOr<Generation> generateGreedy(Engine &engine, const std::vector<int32_t> &prompt,
                                           int maxTokens,
                                           const std::vector<int32_t> &stopTokens) {
  return generate(engine, prompt, maxTokens, stopTokens, SamplingOptions());
}

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_GENERATE_H_

// Generation for one sequence over an Engine (greedy or sampled): the prompt through the
// prefill buckets (padded to a bucket with tokens of the padding slot), then
// one token at a time through the smallest decode bucket.
#ifndef WEFT_RUNTIME_ENGINE_GENERATE_H_
#define WEFT_RUNTIME_ENGINE_GENERATE_H_

#include "runtime/engine/Engine.h"

namespace weft::engine {

struct Generation {
  std::vector<int32_t> tokens;          // generated, after the prompt
  std::vector<float> promptLogits;      // logits of the last prompt token
  double prefillSeconds = 0;
  double decodeSeconds = 0;             // all decode steps
  int decodeSteps = 0;
};

// How the next token is chosen. Temperature 0 is greedy; above 0 the plan
// must sample (weft-compile --sampling), drawing from the softmax at that
// temperature restricted to the top_k most likely tokens (0: all) and to
// the smallest set whose probability reaches top_p. `seed` makes runs
// repeatable.
struct SamplingOptions {
  float temperature = 0;
  int32_t topK = 0;
  float topP = 1;
  uint64_t seed = 0;
};

// Checks the values (temperature >= 0, top_k >= 0, top_p in (0, 1]); an
// error names the bad one.
Status checkSampling(const SamplingOptions &sampling);
// The same, and that the plan can sample when the options ask for it.
Status checkSampling(const Engine &engine, const SamplingOptions &sampling);

StatusOr<Generation> generate(Engine &engine, const std::vector<int32_t> &prompt,
                              int maxTokens, const std::vector<int32_t> &stopTokens,
                              const SamplingOptions &sampling);

inline StatusOr<Generation> generateGreedy(Engine &engine, const std::vector<int32_t> &prompt,
                                           int maxTokens,
                                           const std::vector<int32_t> &stopTokens) {
  return generate(engine, prompt, maxTokens, stopTokens, SamplingOptions());
}

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_GENERATE_H_

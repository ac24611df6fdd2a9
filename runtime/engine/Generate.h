// Greedy generation for one sequence over an Engine: the prompt through the
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

StatusOr<Generation> generateGreedy(Engine &engine, const std::vector<int32_t> &prompt,
                                    int maxTokens, const std::vector<int32_t> &stopTokens);

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_GENERATE_H_

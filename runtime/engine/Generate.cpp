// Single-sequence generation: one request through the scheduler, timed.
#include "runtime/engine/Generate.h"

#include <chrono>

namespace weft::engine {

Status checkSampling(const Engine &engine, const SamplingOptions &s) {
  WEFT_RETURN_IF_ERROR(serve::checkSampling(s));
  if (!s.greedy() && !engine.samples())
    return failedPrecondition("the plan picks tokens by argmax (compiled with "
                              "--sampling=false): it cannot sample");
  return Status::ok();
}

StatusOr<Generation> generate(Engine &engine, const std::vector<int32_t> &prompt,
                              int maxTokens, const std::vector<int32_t> &stopTokens,
                              const SamplingOptions &sampling,
                              const std::function<void(int32_t)> &onToken) {
  serve::Scheduler scheduler(engine);
  return generate(scheduler, engine, prompt, maxTokens, stopTokens, sampling, onToken);
}

StatusOr<Generation> generate(serve::Scheduler &scheduler, Engine &engine,
                              const std::vector<int32_t> &prompt, int maxTokens,
                              const std::vector<int32_t> &stopTokens,
                              const SamplingOptions &sampling,
                              const std::function<void(int32_t)> &onToken) {
  WEFT_RETURN_IF_ERROR(checkSampling(engine, sampling));
  if (!scheduler.idle())
    return failedPrecondition("generate needs an idle scheduler");
  Generation g;
  auto clock = [] { return std::chrono::steady_clock::now(); };
  auto start = clock();
  auto first = start;
  serve::Request r;
  r.prompt = prompt;
  r.maxTokens = maxTokens;
  r.sampling = sampling;
  r.stopTokens = stopTokens;
  r.wantPromptLogits = true;
  r.onEvent = [&](const serve::Event &e) {
    if (e.token < 0)
      return;
    if (g.tokens.empty()) {
      first = clock();
      g.cachedPromptTokens = e.cachedPromptTokens;
    }
    g.tokens.push_back(e.token);
    if (e.promptLogits)
      g.promptLogits = *e.promptLogits;
    if (onToken)
      onToken(e.token);
  };
  StatusOr<uint64_t> id = scheduler.submit(std::move(r));
  if (!id.isOk())
    return id.status();
  WEFT_RETURN_IF_ERROR(scheduler.runUntilIdle());
  auto end = clock();
  g.prefillSeconds = std::chrono::duration<double>(first - start).count();
  g.decodeSeconds = std::chrono::duration<double>(end - first).count();
  g.decodeSteps = g.tokens.empty() ? 0 : int(g.tokens.size()) - 1;
  return g;
}

} // namespace weft::engine

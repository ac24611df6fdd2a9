// Single-sequence generation, greedy or sampled.
#include "runtime/engine/Generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace weft::engine {

Status checkSampling(const SamplingOptions &s) {
  if (!(s.temperature >= 0) || std::isinf(s.temperature))
    return invalidArgument("temperature " + std::to_string(s.temperature) +
                           ": expected a finite number >= 0");
  if (s.topK < 0)
    return invalidArgument("top_k " + std::to_string(s.topK) + ": expected >= 0 (0: off)");
  if (!(s.topP > 0 && s.topP <= 1))
    return invalidArgument("top_p " + std::to_string(s.topP) + ": expected a number in (0, 1]");
  return Status::ok();
}

Status checkSampling(const Engine &engine, const SamplingOptions &s) {
  WEFT_RETURN_IF_ERROR(checkSampling(s));
  bool sampling = s.temperature > 0 || s.topK > 0 || s.topP < 1;
  if (sampling && !engine.samples())
    return failedPrecondition("the plan picks tokens by argmax; compile it with "
                              "weft-compile --sampling to sample");
  return Status::ok();
}

StatusOr<Generation> generate(Engine &engine, const std::vector<int32_t> &prompt,
                              int maxTokens, const std::vector<int32_t> &stopTokens,
                              const SamplingOptions &sampling) {
  if (prompt.empty())
    return invalidArgument("the prompt is empty");
  WEFT_RETURN_IF_ERROR(checkSampling(engine, sampling));
  std::mt19937_64 rng(sampling.seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  // Every token of a step gets the request's parameters and its own draw.
  auto setSampling = [&](StepInputs &in, size_t T) {
    if (!engine.samples())
      return;
    in.temperature.assign(T, sampling.temperature);
    in.topK.assign(T, sampling.topK);
    in.topP.assign(T, sampling.topP);
    in.uniform.resize(T);
    for (float &u : in.uniform)
      u = unit(rng);
  };
  if (engine.decodeBuckets().empty())
    return failedPrecondition("the plan has no decode bucket");
  const int slot = 0;
  Generation g;
  auto clock = [] { return std::chrono::steady_clock::now(); };
  auto start = clock();

  // Prefill: chunks of the largest prefill bucket, the last one padded up
  // to the smallest bucket that holds it; without prefill buckets, the
  // prompt goes token by token through the decode bucket.
  StepOutputs out;
  int32_t next = 0;
  size_t done = 0;
  while (done < prompt.size()) {
    size_t left = prompt.size() - done;
    int bucket = engine.decodeBuckets().front();
    for (int b : engine.prefillBuckets()) {
      bucket = b;
      if (size_t(engine.bucketTokens(b)) >= left)
        break;
    }
    size_t T = size_t(engine.bucketTokens(bucket));
    size_t real = std::min(left, T);
    StepInputs in;
    for (size_t i = 0; i < T; ++i) {
      bool pad = i >= real;
      in.ids.push_back(pad ? 0 : prompt[done + i]);
      in.positions.push_back(int32_t(pad ? i : done + i));
      in.slots.push_back(pad ? engine.paddingSlot() : slot);
    }
    bool last = done + real == prompt.size();
    setSampling(in, T);
    WEFT_RETURN_IF_ERROR(engine.run(bucket, in, last, out));
    if (last) {
      size_t vocab = out.logits.size() / T;
      g.promptLogits.assign(out.logits.begin() + long((real - 1) * vocab),
                            out.logits.begin() + long(real * vocab));
      next = out.next[real - 1];
    }
    done += real;
  }
  g.prefillSeconds = std::chrono::duration<double>(clock() - start).count();

  int decode = engine.decodeBuckets().front();
  size_t T = size_t(engine.bucketTokens(decode));
  start = clock();
  int32_t position = int32_t(prompt.size());
  while (int(g.tokens.size()) < maxTokens) {
    g.tokens.push_back(next);
    if (std::find(stopTokens.begin(), stopTokens.end(), next) != stopTokens.end() ||
        int(g.tokens.size()) == maxTokens)
      break;
    StepInputs in;
    for (size_t i = 0; i < T; ++i) {
      in.ids.push_back(i == 0 ? next : 0);
      in.positions.push_back(i == 0 ? position : int32_t(i));
      in.slots.push_back(i == 0 ? slot : engine.paddingSlot());
    }
    setSampling(in, T);
    WEFT_RETURN_IF_ERROR(engine.run(decode, in, false, out));
    next = out.next[0];
    ++position;
    ++g.decodeSteps;
  }
  g.decodeSeconds = std::chrono::duration<double>(clock() - start).count();
  return g;
}

} // namespace weft::engine

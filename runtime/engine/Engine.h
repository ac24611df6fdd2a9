// The engine: loads a verified plan and its weights onto the GPUs and runs
// the plan's buckets (decode batches and prefill chunks) step by step.
#ifndef WEFT_RUNTIME_ENGINE_ENGINE_H_
#define WEFT_RUNTIME_ENGINE_ENGINE_H_

#include "runtime/base/Status.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/serve/Step.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace weft::engine {

struct EngineOptions {
  // Physical GPU of each declared device (--devices 0,1); empty: device i
  // on GPU i, or every declared device on GPU 0 when there is only one.
  std::vector<int> deviceMap;
  std::string weightsDir;     // checkpoint directory; empty with randomWeights
  // Where the weights the compiler wrote beside the plan are (repacked
  // quantized projections); empty: the plan file's directory.
  std::string planDir;
  bool randomWeights = false; // fill weights with random values (benchmarks)
  // Accept a checkpoint whose safetensors headers differ from the ones the
  // plan was compiled against, as long as every tensor's name, dtype and
  // shape match (weights written elsewhere with the same layout).
  bool skipHeaderChecksums = false;
  bool allowPtxJit = true;
  // Record each single-device bucket's steps as a CUDA graph on its first
  // run and replay it afterwards: one launch per step instead of ~200.
  bool cudaGraphs = true;
  // Tensor-parallel all-reduces use NCCL when the group's devices are
  // distinct GPUs and libnccl.so.2 loads; otherwise (or when false) they
  // gather through peer copies and a generated accumulate kernel.
  bool allowNccl = true;
  // Launch kernels with programmatic dependent launch on sm_90 and newer:
  // each kernel's blocks are scheduled while the one before it finishes
  // (the generated kernels wait for it in griddepcontrol.wait).
  bool programmaticLaunch = true;
  // Run every bucket once at load, with padding tokens only: CUDA graphs
  // are recorded and cuBLASLt algorithms chosen before the first request,
  // so the first request is as fast as the hundredth.
  bool warmUp = true;
  // Micro-batches in flight through a pipeline (0: the plan's choice,
  // partition.chosen.micro_batches). More than one needs a pipeline plan
  // without tensor parallelism, and at most one per stage.
  int microBatches = 0;
  // Called as loading advances: "loading kernels" (kernels), "loading
  // weights" (bytes), "warming up buckets" (buckets).
  std::function<void(const std::string &phase, uint64_t done, uint64_t total)> progress;
};

// Whether a plan's LM head samples (weft-compile --sampling) rather than
// taking the argmax: what Engine::samples() answers, known before any GPU.
bool planSamples(const plan::fb::Plan &plan);

// What can be checked of a run before a GPU is touched: the checkpoint
// directory holds every file the plan's manifest names (or the plan has
// none and the weights are random), so a typo fails at once, not after the
// GPUs start.
Status checkWeightsSource(const plan::fb::Plan &plan, const EngineOptions &options);

using serve::KvLayout;
using serve::StepInputs;
using serve::StepOutputs;

class Engine final : public serve::StepRunner {
public:
  static StatusOr<std::unique_ptr<Engine>> create(plan::PlanFile plan,
                                                  const EngineOptions &options);
  ~Engine() override;

  const plan::fb::Plan &plan() const;
  // How long each phase of create() took, in order: GPUs and contexts,
  // collectives, kernels, buffers, weights, warm-up (seconds).
  const std::vector<std::pair<std::string, double>> &loadPhases() const;
  // The bucket named `name` ("decode_b1", "prefill_c512"); -1 if none.
  int bucketIndex(const std::string &name) const;
  // Prefill and decode buckets, each sorted by token count.
  const std::vector<int> &prefillBuckets() const;
  const std::vector<int> &decodeBuckets() const;
  int bucketTokens(int bucket) const;
  const KvLayout &kvLayout() const override;
  // Sets the block table row of `slot`: position p of the sequence lives in
  // pages[p / blockTokens]. Every page must exist in the pool; the row
  // reaches the GPUs before the next run. An empty list frees the slot.
  Status setBlockTable(int slot, const std::vector<int32_t> &pages) override;
  // How tensor-parallel groups reduce: "none" (no all-reduce in the plan),
  // "NCCL 2.x", or "peer copies (...why)".
  const std::string &collectives() const;
  // Whether the plan's LM head samples (weft-compile --sampling) rather
  // than taking the argmax.
  bool samples() const override;
  int vocabSize() const override;
  // The token counts of the buckets, ascending, without repeats.
  std::vector<int> stepSizes() const override;
  // The bucket of `tokens` tokens (decode buckets first when a prefill
  // bucket has the same size: they are the same code); -1 if none.
  int bucketFor(int tokens) const;
  // Runs the bucket of in.ids.size() tokens and waits for it.
  Status runStep(const StepInputs &in, StepOutputs &out) override;
  // Stages the inputs in pinned memory and puts the copies, the bucket and
  // the copies back on the streams; waitStep waits for the oldest step.
  // Fed tokens are copied from the previous step's head on the GPU.
  Status launchStep(const StepInputs &in) override;
  Status waitStep(StepOutputs &out) override;
  // Micro-batches the scheduler keeps in flight (EngineOptions::microBatches).
  int microBatches() const override;

  // Runs one bucket and waits for it. Every token is checked before
  // anything is launched: its id against the vocabulary, its slot against
  // the block tables (or -1, padding), its position against the context
  // and the pages its slot has; no slot and position twice.
  Status run(int bucket, const StepInputs &in, StepOutputs &out);

  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

private:
  Engine();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_ENGINE_H_

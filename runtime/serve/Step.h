// What one step of a plan takes and gives, and the interface the scheduler
// drives: the engine implements it on GPUs, tests implement it on the CPU.
#ifndef WEFT_RUNTIME_SERVE_STEP_H_
#define WEFT_RUNTIME_SERVE_STEP_H_

#include "runtime/base/Status.h"

#include <cstdint>
#include <vector>

namespace weft::serve {

// The paged KV cache a plan allocates: `pages` pages of `blockTokens`
// positions on every device that holds layers, shared by up to
// `maxSequences` sequences (slots) through their block tables.
struct KvLayout {
  int blockTokens = 0;
  int maxSequences = 0;         // block-table rows; slots are 0..maxSequences-1
  int maxBlocksPerSequence = 0; // block-table row length
  int pages = 0;                // pages in the pool
  int maxContext() const { return blockTokens * maxBlocksPerSequence; }
};

// The slot of padding tokens: they write no KV, attend to nothing and
// give zero output.
inline constexpr int kPaddingSlot = -1;

// One token per entry; padding tokens carry kPaddingSlot.
struct StepInputs {
  std::vector<int32_t> ids, positions, slots;
  // Empty, or per token: -1, or the row of an earlier step whose sampled
  // token is this token's id (ids[i] is then 0 and ignored); feedAge[i]
  // says which step: 1 the one launched just before, 2 the one before it,
  // up to maxStepsInFlight() - 1 (empty: all 1). The runner reads the token
  // where it lies, on the GPU, so a step can be launched before earlier
  // steps' tokens reach the host.
  std::vector<int32_t> feed, feedAge;
  // Rows whose logits come back, in this order.
  std::vector<int32_t> logitRows;
  // Sampling parameters per token, for plans that sample; empty:
  // temperature 0 (greedy), top_k 0 (off), top_p 1, uniform 0.
  std::vector<float> temperature, topP, uniform;
  std::vector<int32_t> topK;
};
struct StepOutputs {
  std::vector<float> logits;     // [logitRows x vocab]
  std::vector<int32_t> next;     // [tokens]
};

// Checks `in.feed` and `in.feedAge`: `launchedTokens[a - 1]` is the token
// count of the step launched `a` launches before (fewer entries: fewer
// steps launched so far).
Status checkFeed(const StepInputs &in, const std::vector<size_t> &launchedTokens);

// Runs steps of a compiled plan: a bucket is a step shape of a fixed token
// count; any mix of sequences (decode tokens, prefill chunks) fits any
// bucket.
class StepRunner {
public:
  virtual ~StepRunner() = default;
  virtual const KvLayout &kvLayout() const = 0;
  virtual int vocabSize() const = 0;
  // Whether the plan's head samples (temperature, top-k, top-p) or only
  // takes the argmax.
  virtual bool samples() const = 0;
  // The token counts of the buckets, ascending, without repeats.
  virtual std::vector<int> stepSizes() const = 0;
  // Sets the block-table row of `slot` (see Engine::setBlockTable).
  virtual Status setBlockTable(int slot, const std::vector<int32_t> &pages) = 0;
  // Runs the bucket of exactly `in.ids.size()` tokens (one of stepSizes())
  // and waits for it. Fed tokens refer to the steps run before.
  virtual Status runStep(const StepInputs &in, StepOutputs &out) = 0;

  // How many steps of disjoint sequences the runner overlaps: the stages
  // of a pipeline, each working on another micro-batch; 1 otherwise.
  virtual int microBatches() const { return 1; }
  // Steps that may be launched and not yet waited for: one more than the
  // micro-batches, so the host builds the next step while they run.
  int maxStepsInFlight() const { return microBatches() + 1; }

  // Puts a step on the GPU and returns at once; waitStep gives the outputs
  // of the oldest step launched and not yet waited for. Block-table
  // changes made after a launch reach only later steps. The defaults run
  // the step inside launchStep (resolving `feed` on the host).
  virtual Status launchStep(const StepInputs &in);
  virtual Status waitStep(StepOutputs &out);

private:
  std::vector<StepOutputs> finished_;       // run by the default launchStep, oldest first
  std::vector<std::vector<int32_t>> history_; // the tokens of recent launches, newest first
};

} // namespace weft::serve

#endif // WEFT_RUNTIME_SERVE_STEP_H_

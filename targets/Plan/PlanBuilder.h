// Lowers a fused, partitioned and specialized module to a plan file: buffer
// assignment with liveness-based reuse, kernel launches, cuBLASLt GEMMs,
// transfers and collectives per bucket, the weight manifest, and the
// compiled kernels of every architecture in the topology.
#ifndef WEFT_TARGETS_PLAN_PLANBUILDER_H_
#define WEFT_TARGETS_PLAN_PLANBUILDER_H_

#include "runtime/plan/PlanSeal.h"
#include "compiler/Import/Checkpoint.h"
#include "compiler/Partition/Partitioner.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <optional>

namespace weft::cuda {
class KernelCache;
}

namespace weft::plan {

struct PlanBuildOptions {
  // Emit code for this architecture ("sm_90") instead of each device's own,
  // e.g. to run a 3090+3060 partition on an H200 for testing.
  std::optional<std::string> archOverride;
  cuda::KernelCache *kernelCache = nullptr; // null: no cache
  int64_t blockTokens = 16;                 // KV cache page size
  // Projections of more tokens go to cuBLASLt (cuda::EmitOptions). 1, not
  // the emitter's 16: on an H200, Llama 3.1 8B decode at 2 and 4 tokens
  // takes 4.72 and 4.83 ms through cuBLASLt against 4.85 and 5.50 ms
  // through the generated GEMV (docs/benchmarks.md).
  int64_t maxGemvTokens = 1;
  // The cost model's step time of a bucket (prefill, tokens) at the given
  // contexts (see StepPrediction in plan.fbs); unset: plans hold none.
  struct Prediction {
    int64_t context = 0;
    double seconds = 0, rawOther = 0, rawAttention = 0;
  };
  std::function<std::vector<Prediction>(bool prefill, int64_t tokens)> predict;
  // Called as work progresses: (phase, done, total).
  std::function<void(llvm::StringRef, size_t, size_t)> progress;
  // Where to write the model's quantized projections, repacked for the
  // kernels (QuantizedWeights.h): a file beside the plan, which the
  // manifest names by its file name. Empty: nothing is written and the
  // manifest names no file for them (a plan to look at, not to run).
  std::string kernelWeightsPath;
  // Signs the plan's seal (weft-compile --sign); null: sealed unsigned.
  const SigningKey *signingKey = nullptr;
};

// Summary figures of a built plan, for reports and tests.
struct PlanStats {
  size_t kernels = 0;        // plan kernels (a binary and its launch geometry)
  size_t binaries = 0;       // kernels x architectures
  size_t cachedBinaries = 0; // served by the kernel cache
  size_t compiledSources = 0; // distinct (source, architecture) pairs compiled or cached
  size_t steps = 0;
  std::vector<uint64_t> peakArenaBytes; // per device, over all buckets
  // The checkpoint's tokenizer.json, as the runtime will read it: "" (none),
  // "BPE, N tokens", or why the runtime cannot use it (the plan still runs
  // from token ids).
  std::string tokenizer;
  bool tokenizerUsable = false;
  // The chat template: "" (none), "usable", or why the runtime cannot
  // render it (the plan then serves completions only).
  std::string chatTemplate;
};

llvm::Expected<std::vector<uint8_t>>
buildPlan(mlir::ModuleOp module, const ModelSource &source,
          const hardware::Topology &topology,
          const partition::PartitionResult &partition,
          const partition::PartitionOptions &partitionOptions,
          const PlanBuildOptions &options, PlanStats *stats = nullptr,
          mlir::OwningOpRef<mlir::ModuleOp> *planIR = nullptr);

} // namespace weft::plan

#endif // WEFT_TARGETS_PLAN_PLANBUILDER_H_

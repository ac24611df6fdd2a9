// The plan back end of the compiler pipeline (compiler/Pipeline): lowers a
// specialized, partitioned module to the plan dialect (weft-lower-to-plan,
// plan-assign-buffers), compiles its kernels for every architecture of the
// topology, writes the quantized projections beside the plan, and
// serializes the plan file.
#ifndef WEFT_TARGETS_PLAN_PLANBACKEND_H_
#define WEFT_TARGETS_PLAN_PLANBACKEND_H_

#include "compiler/Pipeline/Pipeline.h"
#include "targets/Plan/Passes.h"
#include "targets/Plan/PlanSerializer.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace weft::plan {

struct PlanBuildOptions {
  LowerToPlanOptions lowering;              // architecture, page size, GEMV cut-off
  cuda::KernelCache *kernelCache = nullptr; // null: no cache
  // Where to write the model's quantized projections, repacked for the
  // kernels (QuantizedWeights.h), when it has any: a file beside the plan,
  // which the manifest names by its file name. Empty: nothing is written
  // and the manifest names no file for them (a plan to look at, not run).
  std::string kernelWeightsPath;
  // Record each bucket's predicted step time (decode at contexts 64, 128,
  // ... up to the plan's; prefill once), for weft-run --bench.
  bool predictions = true;
  const SigningKey *signingKey = nullptr; // null: sealed unsigned
  // Called as work progresses: (phase, done, total).
  std::function<void(llvm::StringRef, size_t, size_t)> progress;
};

// Summary figures of a built plan, for reports and tests.
struct PlanStats {
  size_t kernels = 0;         // plan kernels (a binary and its launch geometry)
  size_t binaries = 0;        // kernels x architectures
  size_t cachedBinaries = 0;  // served by the kernel cache
  size_t compiledSources = 0; // distinct (source, architecture) pairs compiled or cached
  size_t steps = 0;
  std::vector<uint64_t> peakArenaBytes; // per device, over all buckets
  std::string kernelWeightsPath;        // written beside the plan; "" if none
  // The checkpoint's tokenizer.json, as the runtime will read it: "" (none),
  // "BPE, N tokens", or why the runtime cannot use it (the plan still runs
  // from token ids).
  std::string tokenizer;
  bool tokenizerUsable = false;
  // The chat template: "" (none), "usable", or why the runtime cannot
  // render it (the plan then serves completions only).
  std::string chatTemplate;
};

class PlanBackend : public pipeline::Backend {
public:
  explicit PlanBackend(PlanBuildOptions options) : options(std::move(options)) {}

  llvm::Error check(const pipeline::Compilation &c) override;
  void buildLoweringPipeline(mlir::OpPassManager &pm, const pipeline::Compilation &c) override;
  llvm::Error serialize(pipeline::Compilation &c) override;

  // After serialize(): the plan file's bytes and its figures.
  const std::vector<uint8_t> &plan() const { return bytes; }
  const PlanStats &stats() const { return planStats; }

private:
  PlanBuildOptions options;
  std::vector<uint8_t> bytes;
  PlanStats planStats;
};

} // namespace weft::plan

#endif // WEFT_TARGETS_PLAN_PLANBACKEND_H_

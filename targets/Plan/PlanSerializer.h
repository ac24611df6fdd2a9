// The final step of the back end: a lowered plan module (weft-lower-to-plan,
// plan-assign-buffers) and its compiled kernels written as a plan file
// (runtime/plan/plan.fbs), sealed.
#ifndef WEFT_TARGETS_PLAN_PLANSERIALIZER_H_
#define WEFT_TARGETS_PLAN_PLANSERIALIZER_H_

#include "compiler/Hardware/Topology.h"
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/QuantizedWeights.h"
#include "compiler/Partition/Partitioner.h"
#include "runtime/plan/PlanSeal.h"
#include "targets/CUDA/Nvrtc.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace weft::plan {

// The checkpoint's side files the plan embeds, read before anything is
// built so that one that cannot be read ends the compile early.
struct SideFiles {
  std::string tokenizer;  // tokenizer.json
  std::string generation; // generation_config.json
  // The chat template (chat_template.jinja, or tokenizer_config.json's
  // chat_template) with the file it came from, and the BOS/EOS strings.
  std::string chatTemplate, chatTemplateFile, bos, eos;
};
llvm::Expected<SideFiles> readSideFiles(const ModelSource &source);

// Each plan.kernel of `plan` compiled for each of its architectures, one
// architecture at a time, kernels in parallel: binaries[k] for kernel k.
struct CompiledKernels {
  std::vector<std::vector<cuda::CompiledKernel>> binaries;
  size_t total = 0, cached = 0, distinctSources = 0;
};
llvm::Expected<CompiledKernels>
compilePlanKernels(mlir::ModuleOp plan, cuda::KernelCache *cache,
                   const std::function<void(llvm::StringRef, size_t, size_t)> &progress);

// A bucket's predicted step time at a context (StepPrediction in plan.fbs).
struct StepPredictionRec {
  int64_t context = 0;
  double seconds = 0, rawOther = 0, rawAttention = 0;
};

struct SerializeInputs {
  const ModelSource *source = nullptr;
  const hardware::Topology *topology = nullptr;
  const partition::PartitionResult *partition = nullptr;
  const partition::PartitionOptions *partitionOptions = nullptr;
  std::optional<std::string> archOverride; // the architecture devices record
  const CompiledKernels *kernels = nullptr;
  const SideFiles *sideFiles = nullptr;
  // The file of repacked quantized projections beside the plan, and the
  // weights it holds ("<name>.codes", "<name>.scales").
  struct KernelWeights {
    std::string fileName;
    KernelWeightsFile file;
    std::vector<std::string> tensors;
  };
  std::optional<KernelWeights> kernelWeights;
  // Each bucket's predictions; unset: the plan holds none.
  std::function<std::vector<StepPredictionRec>(bool prefill, int64_t tokens)> predict;
  const SigningKey *signingKey = nullptr; // null: sealed unsigned
};

// Summary figures of a written plan.
struct SerializedStats {
  size_t steps = 0;
  std::vector<uint64_t> peakArenaBytes; // per device, over all buckets
};

llvm::Expected<std::vector<uint8_t>> serializePlan(mlir::ModuleOp plan,
                                                   const SerializeInputs &inputs,
                                                   SerializedStats *stats = nullptr);

} // namespace weft::plan

#endif // WEFT_TARGETS_PLAN_PLANSERIALIZER_H_

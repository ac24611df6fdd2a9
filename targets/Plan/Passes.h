// Lowering of a partitioned, specialized weft module to the plan dialect,
// and the pass pipeline that takes it to a serializable plan.
#ifndef WEFT_TARGETS_PLAN_PASSES_H_
#define WEFT_TARGETS_PLAN_PASSES_H_

#include "compiler/Hardware/Topology.h"
#include "dialects/Plan/IR/PlanDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>

namespace weft::plan {

#define GEN_PASS_DECL
#include "targets/Plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "targets/Plan/Passes.h.inc"

struct LowerToPlanOptions {
  // Generate code for this architecture ("sm_90") instead of each device's
  // own, e.g. to run a 3090+3060 partition on an H200 for testing.
  std::optional<std::string> archOverride;
  int64_t blockTokens = 16; // KV cache page size
  // Projections of more tokens go to cuBLASLt (cuda::EmitOptions). 1, not
  // the emitter's 16: on an H200, Llama 3.1 8B decode at 2 and 4 tokens
  // takes 4.72 and 4.83 ms through cuBLASLt against 4.85 and 5.50 ms
  // through the generated GEMV (docs/benchmarks.md).
  int64_t maxGemvTokens = 1;
  // Batch-1 decode as one persistent kernel per step where the layers
  // allow it (sm_90, cuda::emitDecodeStream); `warn` says why a bucket of
  // one token did not get it.
  bool decodeStream = false;
  // Steps of more rows than sequences compute the LM head on the sampled
  // rows only (cuda::EmitOptions::sampledRowsLogits).
  bool sampledRowsLogits = false;
  // The decode stream kernel's consumer warps (cuda::EmitOptions; 0: auto).
  int decodeStreamWarps = 0;
  std::function<void(const std::string &)> warn;
  // Called as buckets are lowered: (phase, done, total).
  std::function<void(llvm::StringRef, size_t, size_t)> progress;
};

// What weft-lower-to-plan does, with the topology given as an object.
llvm::Error lowerToPlan(mlir::ModuleOp module, const hardware::Topology &topology,
                        const LowerToPlanOptions &options);

std::unique_ptr<mlir::Pass> createLowerToPlanPass(const hardware::Topology &topology,
                                                  const LowerToPlanOptions &options);

// weft-lower-to-plan, then plan-assign-buffers.
void buildPlanLoweringPipeline(mlir::OpPassManager &pm, const hardware::Topology &topology,
                               const LowerToPlanOptions &options);

// Registers weft-lower-to-plan and plan-assign-buffers with MLIR.s registry.
void registerPlanLoweringPasses();

} // namespace weft::plan

#endif // WEFT_TARGETS_PLAN_PASSES_H_

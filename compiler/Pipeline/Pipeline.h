// The compiler's stages in order, as weft-compile runs them: import a model
// (a checkpoint directory or a built-in), fuse it into kernel regions,
// quantize its projections when asked, partition it over a topology,
// specialize it into buckets, then hand it to a back end that lowers and
// writes it (targets/Plan: the plan file). A driver fills Options, calls
// compile() and prints what it wants from the Compilation.
//
// Back ends implement Backend, so this library depends on none of them:
// the dependencies point from targets/ to compiler/, never back.
#ifndef WEFT_COMPILER_PIPELINE_PIPELINE_H_
#define WEFT_COMPILER_PIPELINE_PIPELINE_H_

#include "compiler/Hardware/Topology.h"
#include "compiler/Import/Checkpoint.h"
#include "compiler/Import/QuantizedWeights.h"
#include "compiler/Partition/CostModel.h"
#include "compiler/Partition/Partitioner.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace weft::pipeline {

// Where the compile stops.
enum class Stage {
  Import,     // the imported graph
  Fuse,       // fused into kernel regions and specialized into buckets
  Partition,  // partitioned over the topology and specialized (needs a topology)
  Lower,      // lowered by the back end (printable IR, nothing written)
  Serialize,  // lowered and written by the back end
};

struct Options {
  std::string model; // a checkpoint directory or builtin:NAME
  bool sampling = true;
  Stage stopAfter = Stage::Import;

  // Buckets (weft-specialize). maxBatch unset: the declared batch, at
  // least 64.
  std::optional<int64_t> maxBatch;
  std::vector<int64_t> decodeBuckets, prefillChunks;
  // Tokens per sequence; unset: 4096 or the model's limit if smaller.
  std::optional<int64_t> context;

  // Partitioning (Stage::Partition and later).
  std::string topology; // spec or JSON file (hardware::parseTopologySpec)
  std::string memoryCap;
  std::string objective = "throughput";
  int64_t batch = 1;
  std::string weightDType; // "" : the checkpoint's
  std::string lmHeadDType; // int8|int4|fp8: the LM head quantized; "" : 16-bit
  std::string stages;      // forced layout (partition::parseStageSpec)
  // Whole layers in host RAM when nothing else fits: for reports only, a
  // plan cannot hold them. hostOffloadGiven: the user asked for it.
  bool hostOffload = true, hostOffloadGiven = false;
  // The caller prints the fused graph (--emit=fused): over a topology it
  // holds the weights a plan would, quantized here under --weight-dtype and
  // --lm-head-dtype, so its kernels are the plan's.
  bool graphAsPlan = false;

  // RoPE and the KV-cache write as the QKV projection's epilogue
  // (weft-fuse-projection-rope); false keeps them a kernel of their own,
  // for A/B measurements.
  bool fuseProjectionRope = true;

  // The plan runs one-token decode steps as the decode stream kernel where
  // it takes the layers (weft-compile --decode-stream): the partitioner and
  // the plan's predictions price them so.
  bool decodeStream = false;
};

struct Compilation;

// A target: lowers the specialized, partitioned module and writes it out.
class Backend {
public:
  virtual ~Backend();
  // Refuses what the target cannot run, before the module is lowered.
  virtual llvm::Error check(const Compilation &c) { return llvm::Error::success(); }
  // The passes that lower the module (run by compile() at Stage::Lower).
  virtual void buildLoweringPipeline(mlir::OpPassManager &pm, const Compilation &c) = 0;
  // Writes the lowered module (Stage::Serialize).
  virtual llvm::Error serialize(Compilation &c) = 0;
};

// Everything a compile has produced so far.
struct Compilation {
  Options options;
  std::unique_ptr<mlir::MLIRContext> context;
  ModelSource source;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string importSummary; // the graph as imported, before fusion
  int64_t contextLength = 0; // the resolved --context

  // Stage::Partition and later.
  std::optional<hardware::Topology> topology;
  std::optional<partition::PartitionOptions> partitionOptions;
  std::optional<partition::ModelProfile> profile;
  std::optional<partition::PartitionResult> partition;

  // Projections stored as codes: a quantized checkpoint's, or quantized
  // here (--weight-dtype int4|int8|fp8 and a plan to build). The back end
  // writes them, repacked for its kernels, beside its output.
  std::vector<QuantizedWeightRef> quantized;
  // Things the user should know (e.g. that round-to-nearest is less
  // accurate than a calibrated checkpoint), in order.
  std::vector<std::string> notes;

  // The predicted step time of a bucket at a context (cost model), for a
  // back end to record beside what it builds.
  partition::StepSplit predictStep(bool prefill, int64_t tokens, int64_t contextTokens,
                                   partition::StepSplit *raw) const;
};

// Runs the stages up to options.stopAfter; `backend` is needed from
// Stage::Lower on. Each stage's failure is one error naming what and where.
llvm::Expected<std::unique_ptr<Compilation>> compile(const Options &options,
                                                     Backend *backend = nullptr);

} // namespace weft::pipeline

#endif // WEFT_COMPILER_PIPELINE_PIPELINE_H_

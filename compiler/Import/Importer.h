// Builds the `weft` model graph of a ModelConfig.
#ifndef WEFT_COMPILER_IMPORT_IMPORTER_H_
#define WEFT_COMPILER_IMPORT_IMPORTER_H_

#include "compiler/Import/ModelConfig.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace llvm {
class raw_ostream;
}

namespace weft {

struct ImportOptions {
  // Token selection appended to the graph: greedy (weft.argmax) or sampled
  // with per-request parameters (weft.sample).
  bool sampling = false;
};

// The graph is one function, @forward(ids, positions, slots, cache) ->
// (logits, next_ids), over a dynamic number of tokens; the module carries
// the model's configuration in its `weft.model` attribute.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &context,
                                              const ModelConfig &config,
                                              const ImportOptions &options = {});

// The configuration recorded in a module's `weft.model` attribute (shapes
// and flags; enough for memory accounting and weight names).
llvm::Expected<ModelConfig> modelConfigFromModule(mlir::ModuleOp module);

// A short human-readable summary of an imported graph: dimensions, op counts
// per kind, parameters and weight bytes.
void printGraphSummary(mlir::ModuleOp module, const ModelConfig &config,
                       llvm::raw_ostream &os);

// Quantizing at compile time (weft-compile --weight-dtype int4|int8|fp8 on
// a 16-bit checkpoint): marks every projection weight of `module` (a
// "*_proj.weight" matrix) with #weft.quant: 4-bit integers in groups of
// kCompileTimeGroup inputs (the whole row where that does not divide it),
// 8-bit integers or FP8 E4M3 (`format`) with one group per row. The plan
// builder then quantizes them by round to nearest (quantizeForKernels)
// into the file beside the plan.
inline constexpr int64_t kCompileTimeGroup = 128;
void quantizeProjections(mlir::ModuleOp module, int bits,
                         QuantFormat format = QuantFormat::Int);

// --lm-head-dtype int4|int8|fp8: marks the LM head (the weight of every
// weft.logits) with #weft.quant as quantizeProjections marks the
// projections, to be quantized by round to nearest into the same file. A
// head tied to the embedding becomes a weight op of its own, so that the
// embedding keeps gathering 16-bit rows. An error when the graph has no
// head or the head is not a checkpoint weight.
llvm::Error quantizeLmHead(mlir::ModuleOp module, int bits,
                           QuantFormat format = QuantFormat::Int);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_IMPORTER_H_

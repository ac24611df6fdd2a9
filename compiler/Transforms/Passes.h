// Graph-level passes of the weft dialect and the default pipeline.
#ifndef WEFT_COMPILER_TRANSFORMS_PASSES_H_
#define WEFT_COMPILER_TRANSFORMS_PASSES_H_

#include "dialects/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <vector>

namespace weft {

#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"

// What the pipeline specializes for.
struct CompileOptions {
  int64_t maxBatch = 64;
  std::vector<int64_t> decodeBuckets; // empty: powers of two up to maxBatch
  std::vector<int64_t> prefillChunks; // empty: {512}
};

// The pipeline weft-compile runs and weft-opt exposes as
// --weft-default-pipeline: clean up, fuse into kernel regions, specialize.
void buildDefaultPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

// Registers every weft pass and the default pipeline with MLIR's registry.
void registerAllWeftPasses();

} // namespace weft

#endif // WEFT_COMPILER_TRANSFORMS_PASSES_H_

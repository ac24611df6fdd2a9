// Graph-level passes of the weft dialect and the default pipeline.
#ifndef WEFT_COMPILER_TRANSFORMS_PASSES_H_
#define WEFT_COMPILER_TRANSFORMS_PASSES_H_

#include "dialects/Dist/IR/DistDialect.h"
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
  std::vector<int64_t> prefillChunks; // empty: {largest decode + 64 rounded to 64 if < 512, 512}
};

// Clean up and fuse into kernel regions (the graph keeps @forward).
// fuseProjectionRope: run weft-fuse-projection-rope (off only for A/B
// measurements).
void buildFusionPipeline(mlir::OpPassManager &pm, bool fuseProjectionRope = true);

// The pipeline weft-opt exposes as --weft-default-pipeline: fusion, then
// specialization. (weft-compile runs the fusion part, partitions, then
// specializes.)
void buildDefaultPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

// Adds weft-specialize with `options`.
void addSpecializePass(mlir::OpPassManager &pm, const CompileOptions &options);

// Registers every weft pass and the default pipeline with MLIR's registry.
void registerAllWeftPasses();

} // namespace weft

#endif // WEFT_COMPILER_TRANSFORMS_PASSES_H_

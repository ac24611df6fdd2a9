// weft-fuse-residual-add: a residual add becomes the epilogue of the
// projection whose output it adds.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSERESIDUALADDPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

// A projection, or a region whose last step is one, with no epilogue yet.
bool endsInProjection(Operation *op) {
  if (isa<LinearOp>(op))
    return true;
  auto fusion = dyn_cast<FusionOp>(op);
  if (!fusion || fusion->getNumResults() != 1)
    return false;
  StringRef kind = fusion.getKind();
  return kind.ends_with("linear");
}

struct FuseResidualAddPass : impl::FuseResidualAddPassBase<FuseResidualAddPass> {
  void runOnOperation() override {
    SmallVector<std::pair<Operation *, AddOp>> matches;
    getOperation().walk([&](AddOp add) {
      if (add->getParentOfType<FusionOp>())
        return;
      // The importer writes `add(residual, projection)`; try that side first.
      for (Value v : {add.getRhs(), add.getLhs()}) {
        Operation *producer = v.getDefiningOp();
        // Gemma normalizes the projection's output before the add (its
        // post-attention and post-feedforward norms): norm and add fuse.
        if (producer && (endsInProjection(producer) || isa<RmsNormOp>(producer)) &&
            hasSingleUser(v, add)) {
          matches.push_back({producer, add});
          return;
        }
      }
    });
    IRRewriter rewriter(&getContext());
    for (auto [producer, add] : matches)
      (void)fuseIntoRegion(rewriter, {producer, add.getOperation()},
                           regionKind(producer) + "_residual");
  }
};

} // namespace
} // namespace weft

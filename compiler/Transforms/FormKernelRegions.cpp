// weft-form-kernel-regions: every compute op not fused yet gets a region of
// its own, so that one region is one kernel everywhere.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FORMKERNELREGIONSPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

struct FormKernelRegionsPass
    : impl::FormKernelRegionsPassBase<FormKernelRegionsPass> {
  void runOnOperation() override {
    SmallVector<Operation *> loose;
    for (Block &block : getOperation().getBody())
      for (Operation &op : block)
        if (isa<WeftDialect>(op.getDialect()) &&
            !isa<FusionOp, WeightOp, WeightConcatOp>(op))
          loose.push_back(&op);
    IRRewriter rewriter(&getContext());
    for (Operation *op : loose)
      if (failed(fuseIntoRegion(rewriter, {op}, regionKind(op)))) {
        op->emitError("cannot form a kernel region");
        return signalPassFailure();
      }
  }
};

} // namespace
} // namespace weft

// weft-fuse-rms-norm-linear: an RMSNorm becomes the prologue of the one
// projection that consumes it.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSERMSNORMLINEARPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

struct FuseRmsNormLinearPass
    : impl::FuseRmsNormLinearPassBase<FuseRmsNormLinearPass> {
  void runOnOperation() override {
    SmallVector<SmallVector<Operation *>> groups;
    getOperation().walk([&](RmsNormOp norm) {
      if (norm->getParentOfType<FusionOp>() || !norm->hasOneUse())
        return;
      auto linear = dyn_cast<LinearOp>(*norm->user_begin());
      // The norm must feed the activation, not the weight or bias.
      if (!linear || linear.getInput() != norm.getResult())
        return;
      SmallVector<Operation *> group = {norm, linear};
      if (linear->hasOneUse())
        if (auto split = dyn_cast<SplitOp>(*linear->user_begin()))
          group.push_back(split);
      groups.push_back(group);
    });
    IRRewriter rewriter(&getContext());
    for (ArrayRef<Operation *> group : groups)
      (void)fuseIntoRegion(rewriter, group, "rms_norm_linear");
  }
};

} // namespace
} // namespace weft

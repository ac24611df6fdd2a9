// weft-fuse-lm-head: final norm, LM head and token selection in one region.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSELMHEADPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

struct FuseLmHeadPass : impl::FuseLmHeadPassBase<FuseLmHeadPass> {
  void runOnOperation() override {
    SmallVector<std::pair<SmallVector<Operation *>, std::string>> groups;
    getOperation().walk([&](Operation *select) {
      if (!isa<ArgmaxOp, SampleOp>(select) || select->getParentOfType<FusionOp>())
        return;
      auto logits = select->getOperand(0).getDefiningOp<LogitsOp>();
      if (!logits)
        return;
      SmallVector<Operation *> group = {logits, select};
      std::string kind = "logits_" + regionKind(select);
      if (auto norm = logits.getInput().getDefiningOp<RmsNormOp>();
          norm && hasSingleUser(norm.getResult(), logits)) {
        group.push_back(norm);
        kind = "rms_norm_" + kind;
      }
      groups.push_back({group, kind});
    });
    IRRewriter rewriter(&getContext());
    for (auto &[group, kind] : groups)
      (void)fuseIntoRegion(rewriter, group, kind);
  }
};

} // namespace
} // namespace weft

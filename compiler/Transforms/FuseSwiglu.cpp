// weft-fuse-swiglu: SiLU(gate) * up (or GELU-tanh(gate) * up, Gemma's
// GeGLU) joins the projection that computes gate and up.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSESWIGLUPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

struct FuseSwigluPass : impl::FuseSwigluPassBase<FuseSwigluPass> {
  void runOnOperation() override {
    struct Match {
      SmallVector<Operation *> ops;
      std::string kind;
    };
    SmallVector<Match> matches;
    getOperation().walk([&](MulOp mul) {
      if (mul->getParentOfType<FusionOp>())
        return;
      for (auto [a, b] : {std::pair(mul.getLhs(), mul.getRhs()),
                          std::pair(mul.getRhs(), mul.getLhs())}) {
        Operation *act = a.getDefiningOp();
        if (!act || !isa<SiluOp, GeluTanhOp>(act) || !hasSingleUser(a, mul))
          continue;
        const char *suffix = isa<SiluOp>(act) ? "swiglu" : "geglu";
        Operation *producer = act->getOperand(0).getDefiningOp();
        // Gate and up must come from one producer: a projection region or
        // the split of a merged projection.
        if (!producer || producer != b.getDefiningOp())
          continue;
        Match m;
        m.ops = {producer, act, mul};
        if (auto split = dyn_cast<SplitOp>(producer)) {
          m.kind = std::string("split_") + suffix;
          if (auto linear = split.getInput().getDefiningOp<LinearOp>();
              linear && linear->hasOneUse()) {
            m.ops.push_back(linear);
            m.kind = std::string("linear_") + suffix;
          }
        } else if (auto fusion = dyn_cast<FusionOp>(producer)) {
          m.kind = fusion.getKind().str() + "_" + suffix;
        } else {
          continue;
        }
        matches.push_back(std::move(m));
        return;
      }
    });
    IRRewriter rewriter(&getContext());
    for (Match &m : matches)
      (void)fuseIntoRegion(rewriter, m.ops, m.kind);
  }
};

} // namespace
} // namespace weft

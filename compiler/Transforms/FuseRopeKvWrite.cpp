// weft-fuse-rope-kv-write: rotary embedding of Q and K (with the per-head
// norms before them) and the KV-cache write of a layer become one kernel.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSEROPEKVWRITEPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

// The rope of the query that the attention of `write`'s layer reads.
RopeOp findQueryRope(KvWriteOp write) {
  for (Operation *user : write.getCache().getUsers()) {
    auto attn = dyn_cast<AttentionOp>(user);
    if (!attn || attn.getLayer() != write.getLayer() ||
        attn.getPositions() != write.getPositions() ||
        attn.getSlots() != write.getSlots())
      continue;
    auto rope = attn.getQuery().getDefiningOp<RopeOp>();
    if (rope && rope.getPositions() == write.getPositions() &&
        hasSingleUser(rope.getResult(), attn))
      return rope;
  }
  return nullptr;
}

// The rope, and before it the per-head norm it alone reads (if any).
void addRope(SmallVector<Operation *> &group, RopeOp rope) {
  if (auto norm = rope.getInput().getDefiningOp<HeadRmsNormOp>();
      norm && !norm->getParentOfType<FusionOp>() && hasSingleUser(norm.getResult(), rope))
    group.push_back(norm);
  group.push_back(rope);
}

struct FuseRopeKvWritePass : impl::FuseRopeKvWritePassBase<FuseRopeKvWritePass> {
  void runOnOperation() override {
    SmallVector<SmallVector<Operation *>> groups;
    getOperation().walk([&](KvWriteOp write) {
      if (write->getParentOfType<FusionOp>())
        return;
      auto keyRope = write.getKey().getDefiningOp<RopeOp>();
      if (!keyRope || !hasSingleUser(keyRope.getResult(), write) ||
          keyRope.getPositions() != write.getPositions())
        return;
      SmallVector<Operation *> group;
      addRope(group, keyRope);
      group.push_back(write);
      if (RopeOp queryRope = findQueryRope(write))
        addRope(group, queryRope);
      groups.push_back(group);
    });
    IRRewriter rewriter(&getContext());
    for (ArrayRef<Operation *> group : groups)
      (void)fuseIntoRegion(rewriter, group, "rope_kv_write");
  }
};

} // namespace
} // namespace weft

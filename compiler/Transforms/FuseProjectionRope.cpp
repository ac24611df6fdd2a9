// weft-fuse-projection-rope: the projection that computes a layer's
// queries, keys and values and the rope/KV-write region that consumes them
// become one region, so that the rotation and the cache write are the
// projection's epilogue.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSEPROJECTIONROPEPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

// The head width the epilogue pairs rows of: element i and i + head_dim / 2
// of a head are one output pair, and a GEMV tile of 16 rows must not cross
// half a head.
constexpr int64_t kHeadDimMultiple = 32;

// The tensors the rope region reads that the projection must produce: what
// its ropes rotate and what its kv_write stores without rotation. Empty
// when the region holds anything the epilogue cannot do (head norms) or a
// head width it cannot pair.
SmallVector<Value> projectedInputs(FusionOp region) {
  SmallVector<Value> inner;
  Block &body = region.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (auto rope = dyn_cast<RopeOp>(op)) {
      if (rope.getHeadDim() % kHeadDimMultiple != 0)
        return {};
      inner.push_back(rope.getInput());
    } else if (auto write = dyn_cast<KvWriteOp>(op)) {
      for (Value v : {write.getKey(), write.getValue()})
        if (!v.getDefiningOp<RopeOp>())
          inner.push_back(v);
    } else {
      return {};
    }
  }
  // Back to the region's operands.
  SmallVector<Value> outer;
  for (Value v : inner) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body)
      return {};
    outer.push_back(region.getInputs()[arg.getArgNumber()]);
  }
  return outer;
}

// The projection region all of `values` come from, if each of its results
// is one of them and read by `consumer` alone.
FusionOp soleProjection(ArrayRef<Value> values, Operation *consumer) {
  if (values.empty())
    return nullptr;
  auto producer = values.front().getDefiningOp<FusionOp>();
  if (!producer || !producer.getKind().ends_with("linear"))
    return nullptr;
  for (Value v : values)
    if (v.getDefiningOp() != producer.getOperation())
      return nullptr;
  for (Value r : producer.getResults())
    if (!llvm::is_contained(values, r) ||
        llvm::any_of(r.getUsers(), [&](Operation *u) { return u != consumer; }))
      return nullptr;
  return producer;
}

struct FuseProjectionRopePass : impl::FuseProjectionRopePassBase<FuseProjectionRopePass> {
  void runOnOperation() override {
    SmallVector<std::pair<FusionOp, FusionOp>> pairs; // projection, rope region
    getOperation().walk([&](FusionOp region) {
      if (region.getKind() != "rope_kv_write")
        return;
      if (FusionOp projection = soleProjection(projectedInputs(region), region))
        pairs.push_back({projection, region});
    });
    IRRewriter rewriter(&getContext());
    for (auto [projection, rope] : pairs)
      (void)fuseIntoRegion(rewriter, {projection.getOperation(), rope.getOperation()},
                           (projection.getKind() + "_rope_kv_write").str());
  }
};

} // namespace
} // namespace weft

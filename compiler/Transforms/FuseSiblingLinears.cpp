// weft-fuse-sibling-linears: merges projections that read the same input
// (Q/K/V, gate/up) into one projection over concatenated weights.
#include "compiler/Transforms/FusionUtils.h"
#include "compiler/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;

namespace weft {
#define GEN_PASS_DEF_FUSESIBLINGLINEARSPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

// Siblings can merge when their weights and biases are plain weight
// references of one dtype and one storage (quantization) and either all or
// none have a bias.
bool canMerge(ArrayRef<LinearOp> linears) {
  LinearOp first = linears.front();
  Type dtype = first.getWeight().getType().getElementType();
  bool bias = bool(first.getBias());
  auto firstWeight = first.getWeight().getDefiningOp<WeightOp>();
  for (LinearOp op : linears) {
    if (op.getWeight().getType().getElementType() != dtype ||
        bool(op.getBias()) != bias)
      return false;
    auto w = op.getWeight().getDefiningOp<WeightOp>();
    if (!w || !firstWeight || w.getQuantAttr() != firstWeight.getQuantAttr())
      return false;
    if (bias && (!op.getBias().getDefiningOp<WeightOp>() ||
                 llvm::cast<RankedTensorType>(op.getBias().getType())
                         .getElementType() != dtype))
      return false;
  }
  return true;
}

void mergeSiblings(IRRewriter &rewriter, ArrayRef<LinearOp> linears) {
  LinearOp first = linears.front();
  // Weight references have no operands: hoisting them is always legal, and
  // makes them dominate the merged projection.
  SmallVector<Value> weights, biases;
  SmallVector<int64_t> sizes;
  int64_t total = 0;
  for (LinearOp op : linears) {
    op.getWeight().getDefiningOp()->moveBefore(first);
    weights.push_back(op.getWeight());
    if (Value b = op.getBias()) {
      b.getDefiningOp()->moveBefore(first);
      biases.push_back(b);
    }
    int64_t n = op.getType().getDimSize(1);
    sizes.push_back(n);
    total += n;
  }
  rewriter.setInsertionPoint(first);
  Location loc = first.getLoc();
  RankedTensorType w0 = first.getWeight().getType();
  auto wType = RankedTensorType::get({total, w0.getDimSize(1)}, w0.getElementType());
  Value w = rewriter.create<WeightConcatOp>(loc, wType, weights,
                                            rewriter.getI64IntegerAttr(0));
  Value b;
  if (!biases.empty()) {
    auto bType = RankedTensorType::get({total}, w0.getElementType());
    b = rewriter.create<WeightConcatOp>(loc, bType, biases,
                                        rewriter.getI64IntegerAttr(0));
  }
  RankedTensorType out = first.getType();
  auto wide = rewriter.create<LinearOp>(
      loc, RankedTensorType::get({out.getDimSize(0), total}, out.getElementType()),
      first.getInput(), w, b);
  SmallVector<Type> types;
  for (LinearOp op : linears)
    types.push_back(op.getType());
  auto split = rewriter.create<SplitOp>(loc, types, wide,
                                        rewriter.getDenseI64ArrayAttr(sizes));
  for (auto [op, result] : llvm::zip(linears, split.getResults()))
    rewriter.replaceOp(op, result);
}

struct FuseSiblingLinearsPass
    : impl::FuseSiblingLinearsPassBase<FuseSiblingLinearsPass> {
  void runOnOperation() override {
    llvm::MapVector<Value, SmallVector<LinearOp>> byInput;
    getOperation().walk([&](LinearOp op) {
      if (!op->getParentOfType<FusionOp>())
        byInput[op.getInput()].push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (auto &[input, linears] : byInput) {
      if (linears.size() < 2 || !canMerge(linears))
        continue;
      llvm::sort(linears, [](LinearOp a, LinearOp b) {
        return a->isBeforeInBlock(b);
      });
      mergeSiblings(rewriter, linears);
    }
  }
};

} // namespace
} // namespace weft

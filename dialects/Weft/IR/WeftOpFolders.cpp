// Folders and canonicalization patterns of weft ops.
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace weft;

OpFoldResult WeightConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  return {};
}

LogicalResult SplitOp::fold(FoldAdaptor, SmallVectorImpl<OpFoldResult> &results) {
  if (getNumResults() != 1 || getResult(0).getType() != getInput().getType())
    return failure();
  results.push_back(getInput());
  return success();
}

namespace {

// Rebuilds `op` keeping the inputs in `keepInputs` (with the body's uses of
// dropped arguments replaced by the kept argument in `argReplacement`) and
// the results in `keepResults`.
FusionOp rebuildFusion(PatternRewriter &rewriter, FusionOp op,
                       ArrayRef<unsigned> keepInputs,
                       ArrayRef<std::optional<unsigned>> argReplacement,
                       ArrayRef<unsigned> keepResults) {
  Block &body = op.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());

  SmallVector<Value> inputs;
  for (unsigned i : keepInputs)
    inputs.push_back(op.getInputs()[i]);
  SmallVector<Type> resultTypes;
  SmallVector<Value> yielded;
  for (unsigned r : keepResults) {
    resultTypes.push_back(op.getResult(r).getType());
    yielded.push_back(yield.getValues()[r]);
  }

  auto newOp = rewriter.create<FusionOp>(op.getLoc(), resultTypes, inputs,
                                         op.getKindAttr(), op.getDimsAttr());
  newOp->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getBody(), newOp.getBody(),
                              newOp.getBody().end());
  Block &newBody = newOp.getBody().front();
  // Redirect uses of dropped arguments, then erase them from the back.
  for (unsigned i = 0; i < argReplacement.size(); ++i)
    if (argReplacement[i])
      newBody.getArgument(i).replaceAllUsesWith(newBody.getArgument(*argReplacement[i]));
  llvm::BitVector erase(newBody.getNumArguments(), true);
  for (unsigned i : keepInputs)
    erase.reset(i);
  newBody.eraseArguments(erase);
  rewriter.setInsertionPoint(yield);
  rewriter.replaceOpWithNewOp<YieldOp>(yield, yielded);

  SmallVector<Value> replacements(op.getNumResults(), Value());
  for (auto [newIndex, r] : llvm::enumerate(keepResults))
    replacements[r] = newOp.getResult(newIndex);
  for (unsigned r = 0; r < op.getNumResults(); ++r)
    if (replacements[r])
      rewriter.replaceAllUsesWith(op.getResult(r), replacements[r]);
  rewriter.eraseOp(op);
  return newOp;
}

// Drops results nobody uses, inputs the body does not use, and inputs passed
// twice, so that each kernel reads and writes only what it must.
struct SimplifyFusionInterface : OpRewritePattern<FusionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FusionOp op,
                                PatternRewriter &rewriter) const override {
    Block &body = op.getBody().front();
    auto yield = cast<YieldOp>(body.getTerminator());
    SmallVector<unsigned> keepInputs;
    SmallVector<std::optional<unsigned>> argReplacement(op.getInputs().size());
    llvm::DenseMap<Value, unsigned> firstUse;
    bool changed = false;
    for (auto [i, input] : llvm::enumerate(op.getInputs())) {
      if (body.getArgument(i).use_empty()) {
        changed = true;
        continue;
      }
      auto [it, inserted] = firstUse.try_emplace(input, i);
      if (!inserted) {
        argReplacement[i] = it->second;
        changed = true;
        continue;
      }
      keepInputs.push_back(i);
    }
    SmallVector<unsigned> keepResults;
    llvm::DenseMap<Value, unsigned> yieldedOnce;
    for (unsigned r = 0; r < op.getNumResults(); ++r) {
      Value result = op.getResult(r);
      if (result.use_empty()) {
        changed = true;
        continue;
      }
      // A value yielded twice: the later result reuses the earlier one.
      auto [it, inserted] = yieldedOnce.try_emplace(yield.getValues()[r], r);
      if (!inserted) {
        rewriter.replaceAllUsesWith(result, op.getResult(it->second));
        changed = true;
        continue;
      }
      keepResults.push_back(r);
    }
    if (!changed)
      return failure();
    rebuildFusion(rewriter, op, keepInputs, argReplacement, keepResults);
    return success();
  }
};

} // namespace

void FusionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<SimplifyFusionInterface>(context);
}

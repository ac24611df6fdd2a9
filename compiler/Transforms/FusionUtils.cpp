// Moving groups of ops into weft.fusion regions.
#include "compiler/Transforms/FusionUtils.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;

namespace weft {

std::string regionKind(Operation *op) {
  if (auto fusion = dyn_cast<FusionOp>(op))
    return fusion.getKind().str();
  StringRef name = op->getName().getStringRef();
  name.consume_front("weft.");
  return name.str();
}

bool hasSingleUser(Value value, Operation *user) {
  return value.hasOneUse() && *value.user_begin() == user;
}

static bool hasMemoryEffects(Operation *op) {
  return !isMemoryEffectFree(op);
}

FailureOr<FusionOp> fuseIntoRegion(RewriterBase &rewriter,
                                   ArrayRef<Operation *> opsIn,
                                   StringRef kind) {
  if (opsIn.empty())
    return failure();
  Block *block = opsIn.front()->getBlock();
  llvm::SmallVector<Operation *> ops(opsIn.begin(), opsIn.end());
  for (Operation *op : ops)
    if (op->getBlock() != block)
      return failure();
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  llvm::SmallPtrSet<Operation *, 16> group(ops.begin(), ops.end());
  Operation *first = ops.front(), *last = ops.back();

  // Legality: nothing between the group's ops may use its values, and
  // nothing with memory effects may be crossed by a group that has some.
  bool groupHasEffects = llvm::any_of(ops, hasMemoryEffects);
  for (Operation *op = first; op != last; op = op->getNextNode()) {
    if (group.contains(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && group.contains(def))
        return failure();
    if (groupHasEffects && hasMemoryEffects(op))
      return failure();
  }

  // Interface: inputs in first-use order, outputs in definition order.
  llvm::SetVector<Value> inputs;
  llvm::SmallVector<Value> outputs;
  for (Operation *op : ops) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !group.contains(def))
        inputs.insert(operand);
    }
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !group.contains(user);
          }))
        outputs.push_back(result);
  }

  rewriter.setInsertionPointAfter(last);
  auto fusion = rewriter.create<FusionOp>(
      last->getLoc(), ValueRange(outputs).getTypes(), inputs.getArrayRef(),
      rewriter.getStringAttr(kind), DictionaryAttr());
  Block *body = rewriter.createBlock(&fusion.getBody());
  IRMapping map;
  for (Value input : inputs)
    map.map(input, body->addArgument(input.getType(), input.getLoc()));
  rewriter.setInsertionPointToEnd(body);
  for (Operation *op : ops) {
    auto inner = dyn_cast<FusionOp>(op);
    if (!inner) {
      rewriter.clone(*op, map);
      continue;
    }
    // Flatten: the inner body's arguments are the inner inputs' images.
    Block &innerBody = inner.getBody().front();
    IRMapping innerMap;
    for (auto [arg, input] : llvm::zip(innerBody.getArguments(), inner.getInputs()))
      innerMap.map(arg, map.lookup(input));
    for (Operation &innerOp : innerBody.without_terminator())
      rewriter.clone(innerOp, innerMap);
    auto yield = cast<YieldOp>(innerBody.getTerminator());
    for (auto [result, value] : llvm::zip(inner.getResults(), yield.getValues()))
      map.map(result, innerMap.lookup(value));
  }
  llvm::SmallVector<Value> yielded;
  for (Value output : outputs)
    yielded.push_back(map.lookup(output));
  rewriter.create<YieldOp>(last->getLoc(), yielded);

  for (auto [output, result] : llvm::zip(outputs, fusion.getResults()))
    rewriter.replaceUsesWithIf(output, result, [&](OpOperand &use) {
      return !group.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(ops))
    rewriter.eraseOp(op);
  return fusion;
}

} // namespace weft

//===- AssignBuffers.cpp - plan-assign-buffers ----------------------------===//
//
// Buffer liveness and placement: first fit by decreasing size among the
// buffers whose lifetimes overlap.
//
//===----------------------------------------------------------------------===//
#include "dialects/Plan/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <limits>
#include <map>
#include <vector>

using namespace mlir;

namespace weft::plan_ir {

#define GEN_PASS_DEF_PLANASSIGNBUFFERSPASS
#include "dialects/Plan/Transforms/Passes.h.inc"

LogicalResult assignBufferOffsets(BucketOp bucket) {
  struct Live {
    BufferOp op;
    uint64_t bytes = 0;
    int first = std::numeric_limits<int>::max(), last = -1; // steps, inclusive
    uint64_t offset = 0;
  };
  std::map<int64_t, std::vector<Live>> byDevice; // in index order (the verifier's)
  for (BufferOp b : bucket.getBody().front().getOps<BufferOp>())
    byDevice[b.getDevice()].push_back({b, uint64_t(b.getBytes())});
  int step = 0;
  for (Operation &op : bucket.getBody().front()) {
    auto s = dyn_cast<StepOpInterface>(op);
    if (!s)
      continue;
    bool bad = false;
    s.forEachArg([&](int64_t device, ArgAttr arg) {
      if (arg.getKind() != ArgKind::Buffer)
        return;
      std::vector<Live> &list = byDevice[device];
      if (arg.getIndex() >= int64_t(list.size())) {
        bad = true;
        return;
      }
      Live &l = list[size_t(arg.getIndex())];
      l.first = std::min(l.first, step);
      l.last = std::max(l.last, step);
    });
    if (bad)
      return op.emitOpError("names a buffer its device does not have");
    ++step;
  }
  OpBuilder b(bucket.getContext());
  for (auto &entry : byDevice) {
    std::vector<Live> &list = entry.second;
    std::vector<size_t> order(list.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    llvm::stable_sort(order, [&](size_t x, size_t y) {
      return list[x].bytes > list[y].bytes;
    });
    std::vector<size_t> placed;
    for (size_t id : order) {
      Live &l = list[id];
      uint64_t size = alignToBuffer(l.bytes);
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (size_t other : placed) {
        const Live &o = list[other];
        if (o.first <= l.last && l.first <= o.last)
          busy.push_back({o.offset, o.offset + alignToBuffer(o.bytes)});
      }
      llvm::sort(busy);
      uint64_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (offset + size <= lo)
          break;
        offset = std::max(offset, hi);
      }
      l.offset = offset;
      l.op.setOffsetAttr(b.getI64IntegerAttr(int64_t(offset)));
      placed.push_back(id);
    }
  }
  return success();
}

namespace {

struct PlanAssignBuffersPass
    : impl::PlanAssignBuffersPassBase<PlanAssignBuffersPass> {
  void runOnOperation() override {
    for (BucketOp bucket : getOperation().getOps<BucketOp>())
      if (failed(assignBufferOffsets(bucket)))
        return signalPassFailure();
  }
};

} // namespace
} // namespace weft::plan_ir

// The plan dialect: registration and verifiers.
#include "dialects/Plan/IR/PlanDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

using namespace mlir;
using namespace weft::plan_ir;

#include "dialects/Plan/IR/PlanDialect.cpp.inc"

void PlanDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Plan/IR/PlanAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/Plan/IR/PlanOps.cpp.inc"
      >();
}

#include "dialects/Plan/IR/PlanEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Plan/IR/PlanAttrs.cpp.inc"

LogicalResult ArgAttr::verify(function_ref<InFlightDiagnostic()> emitError, ArgKind kind,
                              int64_t index, int64_t offset, int64_t value) {
  (void)kind;
  if (index < 0 || offset < 0)
    return emitError() << "argument index and offset must be non-negative";
  (void)value;
  return success();
}

// Every buffer argument names a buffer of its device in the bucket.
LogicalResult BucketOp::verify() {
  if (getTokens() <= 0)
    return emitOpError("tokens must be positive");
  std::map<int64_t, int64_t> buffers; // device -> count
  for (Operation &op : getBody().front())
    if (auto b = dyn_cast<BufferOp>(op)) {
      if (b.getIndex() != buffers[b.getDevice()])
        return b.emitOpError() << "index " << b.getIndex() << " out of order (expected "
                               << buffers[b.getDevice()] << ")";
      ++buffers[b.getDevice()];
    }
  auto check = [&](Operation *op, int64_t device, Attribute attr) -> LogicalResult {
    auto arg = llvm::dyn_cast_or_null<ArgAttr>(attr);
    if (arg && arg.getKind() == ArgKind::Buffer && arg.getIndex() >= buffers[device])
      return op->emitOpError() << "buffer " << arg.getIndex() << " is not a buffer of device "
                               << device << " (it has " << buffers[device] << ")";
    return success();
  };
  for (Operation &op : getBody().front()) {
    LogicalResult ok = success();
    if (auto l = dyn_cast<LaunchOp>(op))
      for (Attribute a : l.getArgs())
        ok = succeeded(ok) ? check(l, l.getDevice(), a) : ok;
    else if (auto g = dyn_cast<GemmOp>(op))
      for (Attribute a : {Attribute(g.getA()), Attribute(g.getB()), Attribute(g.getC()),
                          Attribute(g.getBiasAttr()), Attribute(g.getResidualAttr())})
        ok = succeeded(ok) ? check(g, g.getDevice(), a) : ok;
    else if (auto c = dyn_cast<CopyOp>(op))
      ok = succeeded(check(c, c.getSourceDevice(), c.getSource()))
               ? check(c, c.getTargetDevice(), c.getTarget())
               : failure();
    else if (auto r = dyn_cast<AllReduceOp>(op)) {
      for (auto [device, a] : llvm::zip(r.getDevices(), r.getBuffers()))
        ok = succeeded(ok) ? check(r, device, a) : ok;
      ok = succeeded(ok) ? check(r, r.getDevice(), r.getScratch()) : ok;
    }
    if (failed(ok))
      return failure();
  }
  return success();
}

LogicalResult LaunchOp::verify() {
  if (getGrid().size() != 3 || getBlock().size() != 3)
    return emitOpError("grid and block need 3 dimensions");
  int64_t threads = 1;
  for (int64_t d : getBlock())
    threads *= d;
  for (int64_t d : getGrid())
    if (d <= 0)
      return emitOpError("grid dimensions must be positive");
  if (threads <= 0 || threads > 1024)
    return emitOpError() << "a block of " << threads << " threads (expected 1 to 1024)";
  return success();
}

LogicalResult CopyOp::verify() {
  if (getSourceDevice() == getTargetDevice())
    return emitOpError("source and target are the same device");
  return success();
}

LogicalResult AllReduceOp::verify() {
  ArrayRef<int64_t> devices = getDevices();
  if (devices.size() < 2)
    return emitOpError("needs a group of at least 2 devices");
  if (devices.front() != getDevice())
    return emitOpError("runs on rank 0 of its group, device ") << devices.front();
  if (getBuffers().size() != devices.size())
    return emitOpError() << getBuffers().size() << " buffers for " << devices.size()
                         << " devices (expected one per device)";
  if (getCount() <= 0)
    return emitOpError("needs a positive element count");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Plan/IR/PlanOps.cpp.inc"

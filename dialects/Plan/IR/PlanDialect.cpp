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
#include "dialects/Plan/IR/PlanInterfaces.cpp.inc"

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

// Every buffer argument names a buffer of its device in the bucket, and a
// device's buffers are numbered in order.
LogicalResult BucketOp::verify() {
  if (getTokensAttr().getInt() <= 0)
    return emitOpError("tokens must be positive");
  std::map<int64_t, int64_t> buffers; // device -> count
  for (Operation &op : getBody().front())
    if (auto b = dyn_cast<BufferOp>(op)) {
      if (b.getIndex() != buffers[b.getDevice()])
        return b.emitOpError() << "index " << b.getIndex() << " out of order (expected "
                               << buffers[b.getDevice()] << ")";
      ++buffers[b.getDevice()];
    }
  for (Operation &op : getBody().front()) {
    auto step = dyn_cast<StepOpInterface>(op);
    if (!step)
      continue;
    std::optional<InFlightDiagnostic> bad;
    step.forEachArg([&](int64_t device, ArgAttr arg) {
      if (!bad && arg.getKind() == ArgKind::Buffer && arg.getIndex() >= buffers[device])
        bad.emplace(op.emitOpError() << "buffer " << arg.getIndex()
                                     << " is not a buffer of device " << device << " (it has "
                                     << buffers[device] << ")");
    });
    if (bad)
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Steps: the device each runs on and the devices their arguments name
//===----------------------------------------------------------------------===//

int64_t LaunchOp::getStepDevice() { return getDevice(); }
void LaunchOp::forEachArg(function_ref<void(int64_t, ArgAttr)> fn) {
  for (Attribute a : getArgs())
    fn(getDevice(), llvm::cast<ArgAttr>(a));
}

int64_t GemmOp::getStepDevice() { return getDevice(); }
void GemmOp::forEachArg(function_ref<void(int64_t, ArgAttr)> fn) {
  for (ArgAttr a : {getA(), getB(), getC(), getBiasAttr(), getResidualAttr()})
    if (a)
      fn(getDevice(), a);
}

int64_t CopyOp::getStepDevice() { return getSourceDevice(); }
void CopyOp::forEachArg(function_ref<void(int64_t, ArgAttr)> fn) {
  fn(getSourceDevice(), getSource());
  fn(getTargetDevice(), getTarget());
}

int64_t AllReduceOp::getStepDevice() { return getDevice(); }
void AllReduceOp::forEachArg(function_ref<void(int64_t, ArgAttr)> fn) {
  for (auto [device, a] : llvm::zip(getDevices(), getBuffers()))
    fn(device, llvm::cast<ArgAttr>(a));
  fn(getDevice(), getScratch());
}

//===----------------------------------------------------------------------===//
// Tables: kernels and weights
//===----------------------------------------------------------------------===//

namespace {
LogicalResult verifyGeometry(Operation *op, ArrayRef<int64_t> grid, ArrayRef<int64_t> block) {
  if (grid.size() != 3 || block.size() != 3)
    return op->emitOpError("grid and block need 3 dimensions");
  int64_t threads = 1;
  for (int64_t d : block)
    threads *= d;
  for (int64_t d : grid)
    if (d <= 0)
      return op->emitOpError("grid dimensions must be positive");
  if (threads <= 0 || threads > 1024)
    return op->emitOpError() << "a block of " << threads << " threads (expected 1 to 1024)";
  return success();
}
} // namespace

LogicalResult KernelOp::verify() {
  if (getEntry().empty())
    return emitOpError("needs an entry point");
  if (std::optional<StringRef> instance = getInstance(); instance && instance->empty())
    return emitOpError("has an empty template instance");
  if (getArchs().empty())
    return emitOpError("is compiled for no architecture");
  if (getSharedAttr().getInt() < 0)
    return emitOpError("shared memory must be non-negative");
  return verifyGeometry(*this, getGrid(), getBlock());
}

LogicalResult WeightOp::verify() {
  if (getSources().empty())
    return emitOpError("reads no source tensor");
  if (getDevices().empty())
    return emitOpError("is needed on no device");
  if (getShardPartsAttr().getInt() < 1)
    return emitOpError("shard_parts must be at least 1");
  // I64Attr getters return uint64_t: read the signed value.
  int64_t rank = int64_t(getShape().size());
  int64_t shardAxis = getShardAxisAttr().getInt();
  if (shardAxis < -1 || shardAxis >= rank)
    return emitOpError() << "shard_axis " << shardAxis << " of a rank-" << rank << " weight";
  if (IntegerAttr axis = getConcatAxisAttr(); axis && (axis.getInt() < 0 || axis.getInt() >= rank))
    return emitOpError() << "concat_axis " << axis.getInt() << " of a rank-" << rank
                         << " weight";
  return success();
}

LogicalResult LaunchOp::verify() { return verifyGeometry(*this, getGrid(), getBlock()); }

namespace {
// A kernel a step names must be a plan.kernel of the module.
LogicalResult verifyKernelUse(Operation *op, SymbolTableCollection &symbols,
                              FlatSymbolRefAttr kernel, llvm::StringRef what) {
  if (!symbols.lookupNearestSymbolFrom<KernelOp>(op, kernel))
    return op->emitOpError() << what << " " << kernel << " is not a plan.kernel of the module";
  return success();
}
} // namespace

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyKernelUse(*this, symbols, getKernelAttr(), "kernel");
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyKernelUse(*this, symbols, getAccumulateKernelAttr(), "accumulate_kernel");
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
  if (getCountAttr().getInt() <= 0)
    return emitOpError("needs a positive element count");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Plan/IR/PlanOps.cpp.inc"

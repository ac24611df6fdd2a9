// The dist dialect: registration and verifiers.
#include "dialects/Dist/IR/DistDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace weft::dist;

#include "dialects/Dist/IR/DistDialect.cpp.inc"

void DistDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Dist/IR/DistAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/Dist/IR/DistOps.cpp.inc"
      >();
}

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/IR/DistAttrs.cpp.inc"

static LogicalResult verifyDeviceList(function_ref<InFlightDiagnostic()> emitError,
                                      ArrayRef<int64_t> devices) {
  if (devices.empty())
    return emitError() << "needs at least one device";
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0)
      return emitError() << "device indices must be non-negative, got " << devices[i];
    for (size_t j = 0; j < i; ++j)
      if (devices[i] == devices[j])
        return emitError() << "device " << devices[i] << " is listed twice";
  }
  return success();
}

LogicalResult PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t stage, DenseI64ArrayAttr devices) {
  if (stage < 0)
    return emitError() << "stage must be non-negative, got " << stage;
  return verifyDeviceList(emitError, devices.asArrayRef());
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t axis, int64_t parts) {
  if (axis < 0 || axis > 1)
    return emitError() << "shard axis must be 0 or 1, got " << axis;
  if (parts < 2)
    return emitError() << "a shard needs at least 2 parts, got " << parts;
  return success();
}

LogicalResult TransferOp::verify() {
  if (getSource() == getTarget())
    return emitOpError() << "source and target are both device " << getSource();
  return success();
}

LogicalResult AllReduceOp::verify() {
  auto emit = [&]() { return emitOpError(); };
  if (failed(verifyDeviceList(emit, getDevices())))
    return failure();
  if (getDevices().size() < 2)
    return emitOpError("needs a group of at least 2 devices");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Dist/IR/DistOps.cpp.inc"

// What each weft op means to the analyses (WeftInterfaces.td), one op per
// block: the dimensions it fixes (RegionDimsOpInterface), its arithmetic
// and cache traffic (CostOpInterface) and its share on one of several
// tensor-parallel devices (TensorParallelOpInterface).
#include "dialects/Weft/IR/WeftOps.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace mlir;

#include "dialects/Weft/IR/WeftInterfaces.cpp.inc"

namespace weft {
namespace {

int64_t width(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getDimSize(1); }

uint64_t elementBytes(Type t) {
  return std::max<uint64_t>(1, (t.getIntOrFloatBitWidth() + 7) / 8);
}

RankedTensorType withWidth(Value v, int64_t w) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  return RankedTensorType::get({t.getDimSize(0), w}, t.getElementType(), t.getEncoding());
}

OpCost flopsOnly(double flops) {
  OpCost c;
  c.flops = flops;
  return c;
}

// An op that works on each feature (or head) alike: its share has its
// input's share's type.
std::string keepInputType(Operation *op) {
  op->getResult(0).setType(op->getOperand(0).getType());
  return "";
}

std::string doesNotSplit(Operation *op, llvm::StringRef what, int64_t value, int64_t parts) {
  return (op->getName().getStringRef() + " " + what + " " + llvm::Twine(value) +
          " does not split " + llvm::Twine(parts) + " ways")
      .str();
}

} // namespace

//===----------------------------------------------------------------------===//
// weft.embedding
//===----------------------------------------------------------------------===//

void EmbeddingOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("vocab", getTable().getType().getDimSize(0));
  add("hidden", getTable().getType().getDimSize(1));
}

//===----------------------------------------------------------------------===//
// weft.rms_norm
//===----------------------------------------------------------------------===//

void RmsNormOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("hidden", width(getInput()));
}
OpCost RmsNormOp::estimateCost(double tokens) {
  return flopsOnly(4 * tokens * width(getInput()));
}
std::string RmsNormOp::shardForDevices(int64_t) { return keepInputType(*this); }

//===----------------------------------------------------------------------===//
// weft.head_rms_norm
//===----------------------------------------------------------------------===//

void HeadRmsNormOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("head_dim", getHeadDim());
}
OpCost HeadRmsNormOp::estimateCost(double tokens) {
  return flopsOnly(4 * tokens * width(getInput()));
}
// Whole heads go to each device; the weight is one head's.
std::string HeadRmsNormOp::shardForDevices(int64_t) { return keepInputType(*this); }

//===----------------------------------------------------------------------===//
// weft.linear
//===----------------------------------------------------------------------===//

void LinearOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("k", width(getInput()));
  add("n", width(getResult()));
}
OpCost LinearOp::estimateCost(double tokens) {
  double n = width(getResult()), k = width(getInput());
  return flopsOnly(2 * tokens * n * k + (getBias() ? tokens * n : 0));
}
// Column-parallel: the device's rows of the weight; row-parallel: all
// outputs of a partial sum. Either way the output is the weight's rows.
std::string LinearOp::shardForDevices(int64_t) {
  getResult().setType(withWidth(getResult(), getWeight().getType().getDimSize(0)));
  return "";
}

//===----------------------------------------------------------------------===//
// weft.rope
//===----------------------------------------------------------------------===//

void RopeOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("head_dim", getHeadDim());
}
OpCost RopeOp::estimateCost(double tokens) {
  return flopsOnly(3 * tokens * width(getInput()));
}
std::string RopeOp::shardForDevices(int64_t) { return keepInputType(*this); }

//===----------------------------------------------------------------------===//
// weft.kv_write
//===----------------------------------------------------------------------===//

void KvWriteOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("kv_heads", getCache().getType().getKvHeads());
  add("head_dim", getCache().getType().getHeadDim());
  add("layer", getLayer());
}
OpCost KvWriteOp::estimateCost(double tokens) {
  KvCacheType c = getCache().getType();
  OpCost cost;
  cost.cacheBytesWritten =
      uint64_t(2 * tokens * c.getKvHeads() * c.getHeadDim() * elementBytes(c.getDtype()));
  cost.layer = getLayer();
  return cost;
}
// The device's cache holds its KV heads (the cache type is sharded with it).
std::string KvWriteOp::shardForDevices(int64_t) { return ""; }

//===----------------------------------------------------------------------===//
// weft.attention
//===----------------------------------------------------------------------===//

void AttentionOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("num_heads", getNumHeads());
  add("kv_heads", getNumKvHeads());
  add("head_dim", getHeadDim());
  add("layer", getLayer());
  if (auto window = getSlidingWindow())
    add("sliding_window", *window);
}
// Per cached position: the K and V rows read, q·k and p·v per head, and
// the softmax.
OpCost AttentionOp::estimateCost(double tokens) {
  KvCacheType c = getCache().getType();
  double heads = getNumHeads(), dim = getHeadDim();
  OpCost cost;
  cost.cacheBytesPerPosition =
      uint64_t(2 * tokens * c.getKvHeads() * dim * elementBytes(c.getDtype()));
  cost.flopsPerPosition = 4 * tokens * heads * dim + 5 * tokens * heads;
  if (auto window = getSlidingWindow())
    cost.slidingWindow = int64_t(*window);
  cost.layer = getLayer();
  return cost;
}
std::string AttentionOp::shardForDevices(int64_t parts) {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads();
  if (heads % parts)
    return doesNotSplit(*this, "num_heads", heads, parts);
  if (kvHeads % parts)
    return doesNotSplit(*this, "num_kv_heads", kvHeads, parts);
  setNumHeads(heads / parts);
  setNumKvHeads(kvHeads / parts);
  getResult().setType(withWidth(getResult(), heads / parts * int64_t(getHeadDim())));
  return "";
}

//===----------------------------------------------------------------------===//
// Elementwise: weft.silu, weft.gelu_tanh, weft.add, weft.mul
//===----------------------------------------------------------------------===//

void SiluOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("width", width(getResult()));
}
OpCost SiluOp::estimateCost(double tokens) { return flopsOnly(4 * tokens * width(getResult())); }
std::string SiluOp::shardForDevices(int64_t) { return keepInputType(*this); }

void GeluTanhOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("width", width(getResult()));
}
OpCost GeluTanhOp::estimateCost(double tokens) {
  return flopsOnly(4 * tokens * width(getResult()));
}
std::string GeluTanhOp::shardForDevices(int64_t) { return keepInputType(*this); }

void AddOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("width", width(getResult()));
}
OpCost AddOp::estimateCost(double tokens) { return flopsOnly(tokens * width(getResult())); }
std::string AddOp::shardForDevices(int64_t) { return keepInputType(*this); }

void MulOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("width", width(getResult()));
}
OpCost MulOp::estimateCost(double tokens) { return flopsOnly(tokens * width(getResult())); }
std::string MulOp::shardForDevices(int64_t) { return keepInputType(*this); }

//===----------------------------------------------------------------------===//
// The head: weft.logits, weft.argmax, weft.sample
//===----------------------------------------------------------------------===//

void LogitsOp::recordDims(llvm::function_ref<void(StringRef, int64_t)> add) {
  add("vocab", getWeight().getType().getDimSize(0));
  add("hidden", getWeight().getType().getDimSize(1));
}
OpCost LogitsOp::estimateCost(double tokens) {
  return flopsOnly(2 * tokens * width(getResult()) * width(getInput()));
}

OpCost ArgmaxOp::estimateCost(double tokens) {
  return flopsOnly(tokens * width(getLogits()));
}

OpCost SampleOp::estimateCost(double tokens) {
  return flopsOnly(5 * tokens * width(getLogits()));
}

//===----------------------------------------------------------------------===//
// weft.split
//===----------------------------------------------------------------------===//

// Each part of a column-parallel projection's output splits alike.
std::string SplitOp::shardForDevices(int64_t parts) {
  SmallVector<int64_t> sizes;
  for (auto [i, size] : llvm::enumerate(getSizes())) {
    if (size % parts)
      return doesNotSplit(*this, "width", size, parts);
    sizes.push_back(size / parts);
    Value r = getResult(unsigned(i));
    r.setType(withWidth(r, size / parts));
  }
  setSizes(sizes);
  return "";
}

} // namespace weft

// What a projection region computes (targets/CUDA/EmitterSupport.h's
// Projection): its prologue, weight format, epilogue and token selection,
// read from the ops the fusion passes put in the region.
#include "targets/CUDA/EmitterSupport.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <string>

namespace weft::cuda::detail {

using mlir::BlockArgument;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;

//===----------------------------------------------------------------------===//
// Region analysis: projections (linear / logits with their prologue and
// epilogue ops)
//===----------------------------------------------------------------------===//

// Yielded values -> the fusion results they become.
llvm::DenseMap<Value, llvm::SmallVector<int64_t, 1>> yieldedResults(FusionOp region) {
  llvm::DenseMap<Value, llvm::SmallVector<int64_t, 1>> map;
  auto yield = llvm::cast<YieldOp>(region.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    map[v].push_back(int64_t(i));
  return map;
}

// Whether every user of `v` is the region's terminator.
bool onlyYielded(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *u) { return llvm::isa<YieldOp>(u); });
}

llvm::Error analyzeRopeEpilogue(FusionOp region, SplitOp split, Projection &p);

// Recognizes [rms_norm] -> linear|logits -> [split [silu, mul] | split
// [rope, kv_write] | add | argmax | sample]; returns nothing if the body is
// something else.
llvm::Expected<std::optional<Projection>> analyzeProjection(FusionOp region) {
  mlir::Block &body = region.getBody().front();
  Operation *proj = nullptr;
  for (Operation &op : body.without_terminator()) {
    if (llvm::isa<LinearOp, LogitsOp>(op)) {
      if (proj)
        return regionError(region, "more than one projection in one region");
      proj = &op;
    } else if (!llvm::isa<RmsNormOp, SplitOp, SiluOp, GeluTanhOp, MulOp, AddOp, ArgmaxOp,
                         SampleOp, RopeOp, KvWriteOp>(op)) {
      return std::optional<Projection>();
    }
  }
  if (!proj)
    return std::optional<Projection>();

  auto yielded = yieldedResults(region);
  Projection p;
  p.isLogits = llvm::isa<LogitsOp>(proj);
  Value input = proj->getOperand(0), weight = proj->getOperand(1);
  Value result = proj->getResult(0);
  auto xShape = matrixShape(input);
  auto wShape = matrixShape(weight);
  if (!xShape || !wShape)
    return regionError(region, "projection shapes must be static (run weft-specialize first)");
  p.tokens = xShape->first;
  p.k = xShape->second;
  p.nw = wShape->first;
  if (wShape->second != p.k)
    return regionError(region, "weight width does not match the input width");
  if (p.tokens < 1)
    return regionError(region, "no tokens");

  // Prologue.
  if (auto norm = input.getDefiningOp<RmsNormOp>()) {
    if (!norm->hasOneUse() || yielded.count(norm.getResult()))
      return regionError(region, "the rms_norm result must feed only the projection");
    p.xIn = inputIndex(region, norm.getInput());
    p.normIn = inputIndex(region, norm.getWeight());
    p.eps = norm.getEpsilon().convertToDouble();
    p.normOffset = norm.weightOffsetOrZero();
    auto nt = elementTypeOf(norm.getWeight().getType());
    auto ot = elementTypeOf(norm.getResult().getType());
    if (!nt || !ot)
      return regionError(region, "rms_norm weight must be f16, bf16 or f32");
    p.normType = *nt;
    p.normOutType = *ot;
    if (p.xIn < 0 || p.normIn < 0)
      return regionError(region, "rms_norm operands must be region inputs");
    auto xt = elementTypeOf(norm.getInput().getType());
    if (!xt)
      return regionError(region, "activations must be f16, bf16 or f32");
    p.xType = *xt;
  } else {
    p.xIn = inputIndex(region, input);
    if (p.xIn < 0)
      return regionError(region, "the projection input must be a region input or an rms_norm");
    auto xt = elementTypeOf(input.getType());
    if (!xt)
      return regionError(region, "activations must be f16, bf16 or f32");
    p.xType = *xt;
  }
  p.weightIn = inputIndex(region, weight);
  if (p.weightIn < 0)
    return regionError(region, "the projection weight must be a region input");
  auto wt = elementTypeOf(weight.getType());
  if (!wt)
    return regionError(region, "weights of element type " +
                                   typeString(llvm::cast<mlir::ShapedType>(weight.getType())
                                                  .getElementType()) +
                                   " are not supported (f16, bf16 or f32)");
  p.weightType = *wt;
  if (QuantAttr q = quantOf(region.getOperand(unsigned(p.weightIn)))) {
    p.quantBits = q.getBits();
    p.quantGroup = q.getGroup();
    p.quantFormat = q.getFormat();
    p.quantTiled = q.getTiled();
    if (p.quantTiled && (p.nw % 16 != 0 || p.k % 128 != 0))
      return regionError(region, "tiled 4-bit codes of a " + std::to_string(p.nw) + " x " +
                                     std::to_string(p.k) +
                                     " weight (tiles are 16 rows by 128 inputs)");
  }
  if (auto linear = llvm::dyn_cast<LinearOp>(proj); linear && linear.getBias()) {
    p.biasIn = inputIndex(region, linear.getBias());
    auto bt = elementTypeOf(linear.getBias().getType());
    if (p.biasIn < 0 || !bt)
      return regionError(region, "the bias must be an f16, bf16 or f32 region input");
    p.biasType = *bt;
  }
  auto lt = elementTypeOf(result.getType());
  if (!lt)
    return regionError(region, "the projection result must be f16, bf16 or f32");
  p.linType = *lt;
  p.outType = p.linType;

  // Epilogue.
  llvm::SmallVector<Operation *> users;
  for (Operation *u : result.getUsers())
    if (!llvm::isa<YieldOp>(u) && !llvm::is_contained(users, u))
      users.push_back(u);
  auto yieldedAs = [&](Value v) {
    auto it = yielded.find(v);
    return it == yielded.end() ? llvm::SmallVector<int64_t, 1>() : it->second;
  };

  if (p.isLogits) {
    p.epilogue = Epilogue::Logits;
    if (auto cap = llvm::cast<LogitsOp>(proj).getSoftcap())
      p.logitsSoftcap = cap->convertToDouble();
    p.outResults = yieldedAs(result);
    if (users.size() > 1)
      return regionError(region, "logits feed more than one token selection");
    if (users.empty())
      return p;
    Operation *sel = users.front();
    if (!onlyYielded(sel->getResult(0)))
      return regionError(region, "the selected tokens must be region results");
    p.idResults = yieldedAs(sel->getResult(0));
    if (llvm::isa<ArgmaxOp>(sel)) {
      p.select = Projection::Select::Argmax;
    } else if (auto s = llvm::dyn_cast<SampleOp>(sel)) {
      p.select = Projection::Select::Sample;
      p.temperatureIn = inputIndex(region, s.getTemperature());
      p.topKIn = inputIndex(region, s.getTopK());
      p.topPIn = inputIndex(region, s.getTopP());
      p.uniformIn = inputIndex(region, s.getUniform());
      if (p.temperatureIn < 0 || p.topKIn < 0 || p.topPIn < 0 || p.uniformIn < 0)
        return regionError(region, "sampling parameters must be region inputs");
    } else {
      return regionError(region, "logits feed a '" + sel->getName().getStringRef() +
                                     "', expected weft.argmax or weft.sample");
    }
    if (p.idResults.empty())
      return regionError(region, "the selected tokens are not a region result");
    return p;
  }

  if (users.empty()) {
    p.epilogue = Epilogue::Plain;
    p.outResults = yieldedAs(result);
    if (p.outResults.empty())
      return regionError(region, "the projection result is not used");
    return p;
  }
  if (users.size() > 1 || !yieldedAs(result).empty())
    return regionError(region, "the projection result has several consumers");
  Operation *user = users.front();

  if (auto add = llvm::dyn_cast<AddOp>(user)) {
    Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
    p.residualIn = inputIndex(region, other);
    if (p.residualIn < 0 || other == result)
      return regionError(region, "the residual must be a region input");
    p.residualType = *elementTypeOf(other.getType());
    p.outType = *elementTypeOf(add.getResult().getType());
    if (!onlyYielded(add.getResult()))
      return regionError(region, "the residual sum must be a region result");
    p.epilogue = Epilogue::Residual;
    p.outResults = yieldedAs(add.getResult());
    return p;
  }

  auto split = llvm::dyn_cast<SplitOp>(user);
  if (!split)
    return regionError(region, "unsupported projection epilogue '" +
                                   user->getName().getStringRef() + "'");
  int64_t offset = 0;
  for (auto [i, size] : llvm::enumerate(split.getSizes())) {
    Segment s;
    s.offset = offset;
    s.size = size;
    s.type = *elementTypeOf(split.getResult(i).getType());
    s.results = yieldedAs(split.getResult(i));
    offset += size;
    p.segments.push_back(s);
  }
  if (offset != p.nw)
    return regionError(region, "split sizes do not add up to the projection width");
  if (llvm::any_of(split.getResults(), [](Value r) {
        return llvm::any_of(r.getUsers(),
                            [](Operation *u) { return llvm::isa<RopeOp, KvWriteOp>(u); });
      })) {
    if (llvm::Error e = analyzeRopeEpilogue(region, split, p))
      return std::move(e);
    return p;
  }

  // SwiGLU: silu(split#a) * split#b, the only consumers of the split
  // (GeGLU: gelu_tanh in place of silu).
  Operation *act = nullptr;
  MulOp mul;
  for (Value r : split.getResults())
    for (Operation *u : r.getUsers()) {
      if (llvm::isa<SiluOp, GeluTanhOp>(u))
        act = u;
      else if (auto m = llvm::dyn_cast<MulOp>(u))
        mul = m;
      else if (!llvm::isa<YieldOp>(u))
        return regionError(region, "unsupported consumer '" + u->getName().getStringRef() +
                                       "' of the split");
    }
  if (!act && !mul) {
    p.epilogue = Epilogue::Split;
    return p;
  }
  if (!act || !mul || !act->hasOneUse() || *act->getUsers().begin() != mul.getOperation())
    return regionError(region, "expected silu(gate) * up after the split");
  p.gelu = llvm::isa<GeluTanhOp>(act);
  Value up = mul.getLhs() == act->getResult(0) ? mul.getRhs() : mul.getLhs();
  auto segmentOf = [&](Value v) -> int64_t {
    for (auto [i, r] : llvm::enumerate(split.getResults()))
      if (r == v)
        return int64_t(i);
    return -1;
  };
  int64_t gate = segmentOf(act->getOperand(0)), upSeg = segmentOf(up);
  if (gate < 0 || upSeg < 0 || gate == upSeg ||
      p.segments[gate].size != p.segments[upSeg].size)
    return regionError(region, "gate and up must be two equal parts of the split");
  for (const Segment &s : p.segments)
    if (!s.results.empty())
      return regionError(region, "a SwiGLU region may only yield the product");
  if (!onlyYielded(mul.getResult()))
    return regionError(region, "the SwiGLU product must be a region result");
  p.epilogue = Epilogue::Swiglu;
  p.gateOffset = p.segments[gate].offset;
  p.upOffset = p.segments[upSeg].offset;
  p.width = p.segments[gate].size;
  p.linType = p.segments[gate].type;
  p.outType = *elementTypeOf(mul.getResult().getType());
  p.outResults = yieldedAs(mul.getResult());
  return p;
}

// The parts of a QKV projection's split as RoPE and the KV-cache write
// consume them (weft-fuse-projection-rope): each part is rotated by one
// rope and yielded and/or written to the cache, or written unrotated.
llvm::Error analyzeRopeEpilogue(FusionOp region, SplitOp split, Projection &p) {
  KvWriteOp write;
  for (Operation &op : region.getBody().front().without_terminator())
    if (auto w = llvm::dyn_cast<KvWriteOp>(op)) {
      if (write)
        return regionError(region, "more than one kv_write");
      write = w;
    } else if (llvm::isa<SiluOp, GeluTanhOp, MulOp, AddOp, ArgmaxOp, SampleOp>(op)) {
      return regionError(region, "'" + op.getName().getStringRef() +
                                     "' beside a RoPE epilogue");
    }
  auto yielded = yieldedResults(region);
  if (write) {
    auto cache = write.getCache().getType();
    auto ct = elementTypeOf(cache.getDtype());
    if (!ct)
      return regionError(region, "the KV cache must be f16, bf16 or f32");
    p.cacheType = *ct;
    p.kvHeads = cache.getKvHeads();
    p.headDim = cache.getHeadDim();
    p.layer = int64_t(write.getLayer());
    p.writePositionsIn = inputIndex(region, write.getPositions());
    p.slotsIn = inputIndex(region, write.getSlots());
    if (p.writePositionsIn < 0 || p.slotsIn < 0)
      return regionError(region, "kv_write positions and slots must be region inputs");
  }
  // Which cache `v` is written to (0: none), and whether anything else
  // uses it.
  auto cacheOf = [&](Value v, bool &other) {
    int cache = 0;
    for (mlir::OpOperand &use : v.getUses()) {
      if (write && use.getOwner() == write.getOperation() &&
          use.getOperandNumber() < 2) // key, value
        cache = use.getOperandNumber() == 0 ? 1 : 2;
      else if (!llvm::isa<YieldOp>(use.getOwner()))
        other = true;
    }
    return cache;
  };
  for (auto [i, r] : llvm::enumerate(split.getResults())) {
    Segment &s = p.segments[i];
    if (!s.results.empty())
      return regionError(region, "a projection with a RoPE epilogue yields only rotated or "
                                 "cached parts, not split part " + llvm::Twine(i));
    if (!r.hasOneUse())
      return regionError(region, "split part " + llvm::Twine(i) +
                                     " must feed one rope or the cache write alone");
    Operation *user = *r.getUsers().begin();
    Value out = r;
    s.resultType = s.type;
    if (auto rope = llvm::dyn_cast<RopeOp>(user)) {
      if (p.headDim && rope.getHeadDim() != p.headDim)
        return regionError(region, "rope head_dim differs from the cache's or another rope's");
      p.headDim = rope.getHeadDim();
      int64_t positions = inputIndex(region, rope.getPositions());
      if (positions < 0 || (p.ropePositionsIn >= 0 && positions != p.ropePositionsIn))
        return regionError(region, "the ropes must read one positions input of the region");
      p.ropePositionsIn = positions;
      llvm::Expected<std::vector<double>> inv = rope.inverseFrequencies();
      if (!inv)
        return regionError(region, llvm::toString(inv.takeError()));
      s.table = llvm::find(p.ropeTables, *inv) - p.ropeTables.begin();
      if (s.table == int64_t(p.ropeTables.size()))
        p.ropeTables.push_back(*inv);
      auto rt = elementTypeOf(rope.getResult().getType());
      if (!rt)
        return regionError(region, "rope results must be f16, bf16 or f32");
      s.resultType = *rt;
      out = rope.getResult();
      auto y = yielded.find(out);
      if (y != yielded.end())
        s.results = y->second;
    }
    bool other = false;
    s.cache = cacheOf(out, other);
    if (other || (out == r && s.cache == 0))
      return regionError(region, "split part " + llvm::Twine(i) +
                                     " may only be rotated, yielded or written to the cache");
    if (s.cache == 0 && s.results.empty())
      return regionError(region, "split part " + llvm::Twine(i) + " is not used");
  }
  if (p.headDim < 2 || p.headDim % 32 != 0)
    return regionError(region, "a RoPE epilogue needs a head_dim that is a multiple of 32 "
                               "(16-row tiles of half heads), got " + llvm::Twine(p.headDim));
  for (auto [i, s] : llvm::enumerate(p.segments)) {
    if (s.size % p.headDim != 0)
      return regionError(region, "split part " + llvm::Twine(i) + " is not whole heads");
    if (s.cache && s.size != p.kvHeads * p.headDim)
      return regionError(region, "cached split part " + llvm::Twine(i) +
                                     " does not match the cache's kv_heads");
  }
  p.epilogue = Epilogue::Rope;
  return llvm::Error::success();
}

} // namespace weft::cuda::detail

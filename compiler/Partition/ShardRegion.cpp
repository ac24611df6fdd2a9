// Per-device clones of tensor-parallel kernel regions.
#include "compiler/Partition/ShardRegion.h"

#include "compiler/Analysis/RegionDims.h"
#include "dialects/Dist/IR/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace weft::partition {
namespace {

llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

// The shard attribute of a weight value (directly, or of every part of a
// concat, which must agree); null when replicated.
llvm::Expected<dist::ShardAttr> shardOf(Value input) {
  Operation *def = input.getDefiningOp();
  if (auto w = dyn_cast_or_null<WeightOp>(def))
    return w->getAttrOfType<dist::ShardAttr>("dist.shard");
  if (auto c = dyn_cast_or_null<WeightConcatOp>(def)) {
    dist::ShardAttr first;
    bool any = false, all = true;
    for (Value v : c.getInputs()) {
      auto w = v.getDefiningOp<WeightOp>();
      dist::ShardAttr s = w ? w->getAttrOfType<dist::ShardAttr>("dist.shard") : nullptr;
      any |= bool(s);
      all &= bool(s);
      if (s && first && s != first)
        return error("weight_concat parts are sharded differently");
      if (s)
        first = s;
    }
    if (any && !all)
      return error("weight_concat mixes sharded and replicated parts");
    if (first && (first.getAxis() != 0 || c.getAxis() != 0))
      return error("weight_concat of shards must concatenate and shard along axis 0");
    return first;
  }
  return dist::ShardAttr();
}

RankedTensorType withDim(RankedTensorType t, int64_t axis, int64_t size) {
  SmallVector<int64_t> shape(t.getShape());
  shape[size_t(axis)] = size;
  return RankedTensorType::get(shape, t.getElementType(), t.getEncoding());
}

// The weight block argument of a linear op, if it is a region input cut
// along its input axis (a row-parallel projection).
bool isRowParallel(FusionOp region, LinearOp linear) {
  auto arg = dyn_cast<BlockArgument>(linear.getWeight());
  if (!arg)
    return false;
  llvm::Expected<dist::ShardAttr> s = shardOf(region.getInputs()[arg.getArgNumber()]);
  if (!s) {
    llvm::consumeError(s.takeError());
    return false;
  }
  return *s && s->getAxis() == 1;
}

} // namespace

llvm::Expected<Type> shardedInputType(Value input, int64_t parts,
                                      const ShardedValues &sharded) {
  if (auto it = sharded.find(input); it != sharded.end())
    return it->second;
  if (auto cache = dyn_cast<KvCacheType>(input.getType())) {
    if (cache.getKvHeads() % parts)
      return error(llvm::Twine(cache.getKvHeads()) + " KV heads do not split over " +
                   llvm::Twine(parts) + " devices");
    return KvCacheType::get(input.getContext(), cache.getLayers(),
                            cache.getKvHeads() / parts, cache.getHeadDim(), cache.getDtype());
  }
  llvm::Expected<dist::ShardAttr> shard = shardOf(input);
  if (!shard)
    return shard.takeError();
  if (!*shard)
    return input.getType();
  auto t = cast<RankedTensorType>(input.getType());
  int64_t axis = shard->getAxis();
  if (axis >= t.getRank() || t.getDimSize(axis) % parts)
    return error(llvm::formatv("a weight of {0} elements along axis {1} does not split {2} "
                               "ways", axis < t.getRank() ? t.getDimSize(axis) : 0, axis,
                               parts).str());
  return Type(withDim(t, axis, t.getDimSize(axis) / parts));
}

llvm::Expected<ShardedRegion> shardRegion(FusionOp region, int64_t rank, int64_t parts,
                                          const ShardedValues &sharded) {
  MLIRContext *ctx = region.getContext();
  std::string where = ("region " + region.getKind()).str();
  if (parts < 1 || rank < 0 || rank >= parts)
    return error(where + ": rank " + llvm::Twine(rank) + " of " + llvm::Twine(parts));
  ShardedRegion out;
  OpBuilder b(ctx);
  Location loc = region.getLoc();
  out.module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(out.module->getBody());

  SmallVector<Type> inputTypes;
  for (Value input : region.getInputs()) {
    llvm::Expected<Type> t = shardedInputType(input, parts, sharded);
    if (!t)
      return error(where + ": " + llvm::toString(t.takeError()));
    inputTypes.push_back(*t);
  }
  auto fn = b.create<func::FuncOp>(loc, "shard", b.getFunctionType(inputTypes, {}));
  Block *entry = fn.addEntryBlock();
  // A quantized weight stays quantized in the shard: the clone's inputs are
  // arguments, so they carry the weight's storage as an argument attribute.
  for (auto [i, input] : llvm::enumerate(region.getInputs()))
    if (QuantAttr q = quantOf(input))
      fn.setArgAttr(unsigned(i), kQuantArgAttr, q);

  Block &src = region.getBody().front();
  auto body = std::make_unique<Block>();
  IRMapping map;
  for (auto [arg, type] : llvm::zip(src.getArguments(), inputTypes))
    map.map(arg, body->addArgument(type, arg.getLoc()));
  OpBuilder ib(ctx);
  ib.setInsertionPointToEnd(body.get());

  for (Operation &op : src.without_terminator()) {
    // Rank > 0 leaves the residual of a row-parallel projection to rank 0.
    if (auto add = dyn_cast<AddOp>(op); add && rank > 0) {
      for (auto [mine, other] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
        auto linear = mine.getDefiningOp<LinearOp>();
        if (linear && isa<BlockArgument>(other) && isRowParallel(region, linear)) {
          map.map(add.getResult(), map.lookup(mine));
          out.droppedResidual = true;
          break;
        }
      }
      if (map.contains(add.getResult()))
        continue;
    }
    Operation *copy = ib.clone(op, map);
    if (parts == 1)
      continue; // the region as is
    if (auto linear = dyn_cast<LinearOp>(copy);
        linear && linear.getBias() && isRowParallel(region, cast<LinearOp>(op)))
      return error(where + ": a row-parallel projection with a bias cannot be sharded "
                           "(the bias would be added on every device)");
    auto shardable = dyn_cast<TensorParallelOpInterface>(copy);
    if (!shardable)
      return error(where + ": '" + op.getName().getStringRef() + "' cannot run tensor parallel");
    std::string problem = shardable.shardForDevices(parts);
    if (!problem.empty())
      return error(where + ": " + problem);
  }
  auto yield = cast<YieldOp>(src.getTerminator());
  SmallVector<Value> values;
  for (Value v : yield.getValues())
    values.push_back(map.lookup(v));
  ib.create<YieldOp>(yield.getLoc(), values);

  std::string kind = region.getKind().str();
  if (out.droppedResidual && llvm::StringRef(kind).ends_with("_residual"))
    kind.resize(kind.size() - std::string("_residual").size());
  b.setInsertionPointToStart(entry);
  auto clone = b.create<FusionOp>(loc, ValueRange(values).getTypes(), entry->getArguments(),
                                  b.getStringAttr(kind), DictionaryAttr());
  clone.getBody().push_back(body.release());
  b.create<func::ReturnOp>(loc, clone.getResults());
  fn.setFunctionType(b.getFunctionType(inputTypes, clone.getResultTypes()));
  int64_t tokens = 1;
  if (DictionaryAttr dims = region.getDimsAttr())
    if (auto t = dims.getAs<IntegerAttr>("tokens"))
      tokens = t.getInt();
  clone.setDimsAttr(computeRegionDims(clone, tokens));
  if (failed(verify(*out.module)))
    return error(where + ": the rank " + llvm::Twine(rank) + " shard does not verify");
  out.region = clone;
  out.function = fn;
  return out;
}

} // namespace weft::partition

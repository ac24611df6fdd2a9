// Per-region traffic and arithmetic, from the static types in the region.
#include "compiler/Analysis/RegionCost.h"

#include "compiler/Support/Error.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

namespace weft {
namespace {

uint64_t elementBytes(Type t) {
  return std::max<uint64_t>(1, (t.getIntOrFloatBitWidth() + 7) / 8);
}

// Bytes of a tensor whose dynamic token dimension counts as `tokens`.
uint64_t tensorBytes(Type type, int64_t tokens) {
  auto t = llvm::dyn_cast<RankedTensorType>(type);
  if (!t)
    return 0;
  uint64_t n = 1;
  for (int64_t d : t.getShape())
    n *= uint64_t(ShapedType::isDynamic(d) ? tokens : d);
  return n * elementBytes(t.getElementType());
}

bool isWeight(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<WeightOp, WeightConcatOp>(def);
}

// Bytes of a quantized weight as the kernels read it: its codes, and a
// 16-bit (scale, zero) pair per group of integer codes or an f32 scale per
// row of E4M3 codes.
uint64_t quantizedBytes(RankedTensorType type, QuantAttr q) {
  const uint64_t rows = uint64_t(type.getDimSize(0)), in = uint64_t(type.getDimSize(1));
  const uint64_t codes = rows * in * uint64_t(q.getBits()) / 8;
  if (q.getFormat() == QuantFormat::E4M3)
    return codes + rows * 4;
  return codes + rows * (in / uint64_t(q.getGroup())) * 4;
}

// Bytes of a weight input as stored: quantized weights (or a concatenation
// of them, as QKV's) by their codes and scales, others by their type.
uint64_t storedWeightBytes(Value v, uint64_t typeBytes) {
  if (auto w = v.getDefiningOp<WeightOp>()) {
    if (QuantAttr q = w.getQuantAttr())
      return quantizedBytes(w.getType(), q);
  } else if (auto concat = v.getDefiningOp<WeightConcatOp>()) {
    uint64_t sum = 0;
    for (Value part : concat.getInputs()) {
      auto w = part.getDefiningOp<WeightOp>();
      if (!w || !w.getQuantAttr())
        return typeBytes; // 16-bit parts: the concatenation's own type
      sum += quantizedBytes(w.getType(), w.getQuantAttr());
    }
    return sum;
  }
  return typeBytes;
}

} // namespace

RegionCost estimateRegionCost(FusionOp region, const CostContext &ctx) {
  RegionCost cost;
  cost.kind = region.getKind().str();
  cost.tokens = 1;
  if (DictionaryAttr dims = region.getDimsAttr())
    if (auto t = dims.getAs<IntegerAttr>("tokens"))
      cost.tokens = t.getInt();
  const double T = double(cost.tokens);

  // An embedding gathers T rows of its table, not the whole table.
  llvm::DenseSet<Value> gathered;
  region.walk([&](EmbeddingOp op) {
    if (auto arg = llvm::dyn_cast<BlockArgument>(op.getTable()))
      gathered.insert(region.getInputs()[arg.getArgNumber()]);
  });
  for (Value input : region.getInputs()) {
    auto type = llvm::dyn_cast<RankedTensorType>(input.getType());
    if (type && (gathered.contains(input) || isWeight(input))) {
      uint64_t rows = type.getRank() == 2 ? uint64_t(type.getDimSize(0)) : 0;
      uint64_t bytes = tensorBytes(type, cost.tokens);
      if (gathered.contains(input)) {
        bytes = bytes / rows * uint64_t(cost.tokens);
        rows = uint64_t(cost.tokens);
      }
      // The report reads the stored bytes; the cost model prices the
      // elements in the partition's weight format.
      cost.weightBytes += gathered.contains(input) ? bytes : storedWeightBytes(input, bytes);
      if (type.getRank() == 2) {
        cost.matrixElements += bytes / elementBytes(type.getElementType());
        cost.matrixRows += rows;
      } else {
        cost.vectorBytes += bytes;
      }
    } else {
      cost.activationBytesRead += tensorBytes(input.getType(), cost.tokens);
    }
  }
  for (Value result : region.getResults())
    cost.bytesWritten += tensorBytes(result.getType(), cost.tokens);

  for (Operation &op : region.getBody().front().without_terminator()) {
    StringRef name = op.getName().getStringRef();
    name.consume_front("weft.");
    cost.ops.push_back(name.str());
    auto costOf = dyn_cast<CostOpInterface>(op);
    if (!costOf)
      continue; // no arithmetic of its own (a split)
    OpCost c = costOf.estimateCost(T);
    cost.flops += c.flops;
    cost.bytesWritten += c.cacheBytesWritten;
    if (c.layer >= 0)
      cost.layer = c.layer;
    if (c.cacheBytesPerPosition || c.flopsPerPosition) {
      // Attention: its per-position terms over the context, bounded by the
      // window.
      double context = double(ctx.contextLength);
      if (c.slidingWindow) {
        context = std::min(context, double(c.slidingWindow));
        cost.slidingWindow = c.slidingWindow;
      }
      cost.kvBytesPerPosition += c.cacheBytesPerPosition;
      cost.attentionFlopsPerPosition += c.flopsPerPosition;
      cost.kvBytesRead += uint64_t(context * double(c.cacheBytesPerPosition));
      cost.flops += context * c.flopsPerPosition;
    }
  }
  // Layer of a projection region: its weights' (the importer's `layer`).
  if (cost.layer < 0) {
    for (Value input : region.getInputs()) {
      Operation *def = input.getDefiningOp();
      SmallVector<WeightOp> refs;
      if (auto w = dyn_cast_or_null<WeightOp>(def))
        refs.push_back(w);
      else if (auto c = dyn_cast_or_null<WeightConcatOp>(def))
        for (Value v : c.getInputs())
          if (auto w = v.getDefiningOp<WeightOp>())
            refs.push_back(w);
      for (WeightOp w : refs)
        if (std::optional<uint64_t> layer = w.getLayer())
          cost.layer = int64_t(*layer);
    }
  }
  return cost;
}

void printFusionReport(ModuleOp module, const CostContext &ctx,
                       llvm::raw_ostream &os) {
  SmallVector<func::FuncOp> fns(module.getOps<func::FuncOp>());
  if (fns.empty()) {
    os << "no functions\n";
    return;
  }
  func::FuncOp shown = fns.front();
  for (func::FuncOp fn : fns)
    if (fn.getSymName().starts_with("decode_")) {
      shown = fn;
      break;
    }

  // Regions per decoder layer, in the function shown.
  llvm::DenseMap<int64_t, unsigned> perLayer;
  shown.walk([&](FusionOp r) {
    int64_t layer = estimateRegionCost(r, ctx).layer;
    if (layer >= 0)
      ++perLayer[layer];
  });
  unsigned maxPerLayer = 0;
  for (auto &[layer, n] : perLayer)
    maxPerLayer = std::max(maxPerLayer, n);
  os << llvm::formatv("fusion regions: {0} per decoder layer in @{1} "
                      "(attention context {2})\n",
                      maxPerLayer, shown.getSymName(), ctx.contextLength);

  const char *row = "{0,4}  {1,-5}  {2,-30}  {3,-42}  {4,10}  {5,10}  {6,12}\n";
  os << llvm::formatv(row, "#", "layer", "kind", "ops", "read", "write",
                      "FLOP/token");
  unsigned index = 0;
  shown.walk([&](FusionOp r) {
    RegionCost c = estimateRegionCost(r, ctx);
    std::string ops;
    for (const std::string &o : c.ops)
      ops += (ops.empty() ? "" : ",") + o;
    std::string layer = c.layer >= 0 ? std::to_string(c.layer) : "-";
    os << llvm::formatv(row, index++, layer, c.kind, ops,
                        formatBytes(double(c.bytesRead())),
                        formatBytes(double(c.bytesWritten)),
                        llvm::formatv("{0:e2}", c.flopsPerToken()).str());
  });

  os << "\nper function (one step):\n";
  const char *fnRow = "  {0,-16}  {1,7}  {2,8}  {3,12}  {4,12}  {5,12}\n";
  os << llvm::formatv(fnRow, "function", "tokens", "regions", "weights",
                      "other read", "FLOP/token");
  for (func::FuncOp fn : fns) {
    unsigned regions = 0;
    uint64_t weights = 0, other = 0;
    double flops = 0;
    int64_t tokens = 1;
    fn.walk([&](FusionOp r) {
      RegionCost c = estimateRegionCost(r, ctx);
      ++regions;
      weights += c.weightBytes;
      other += c.activationBytesRead + c.kvBytesRead;
      flops += c.flops;
      tokens = c.tokens;
    });
    os << llvm::formatv(fnRow, fn.getSymName(), tokens, regions,
                        formatBytes(double(weights)), formatBytes(double(other)),
                        llvm::formatv("{0:e2}", flops / double(tokens)).str());
  }
}

} // namespace weft

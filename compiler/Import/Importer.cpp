// Translation of a ModelConfig into the `weft` graph dialect: the family's
// decoder (Architectures/) built with weft ops, then the token selection.
#include "compiler/Import/Importer.h"

#include "compiler/Import/Architecture.h"
#include "compiler/Support/Error.h"
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;

namespace weft {
namespace {

Type elementType(MLIRContext &ctx, io::DType dtype) {
  switch (dtype) {
  case io::DType::F16: return Float16Type::get(&ctx);
  case io::DType::BF16: return BFloat16Type::get(&ctx);
  default: return Float32Type::get(&ctx);
  }
}

// The families' graph-building interface over weft ops: one @forward
// function whose entry block holds the token inputs and the KV cache.
class WeftGraphBuilder : public ModelGraphBuilder {
public:
  WeftGraphBuilder(MLIRContext &ctx, const ModelConfig &c, OpBuilder &b)
      : ctx(ctx), c(c), b(b), loc(UnknownLoc::get(&ctx)),
        dtype(elementType(ctx, c.dtype)) {}

  RankedTensorType act(int64_t width) {
    return RankedTensorType::get({ShapedType::kDynamic, width}, dtype);
  }

  GraphValue wrap(Value v) {
    values.push_back(v);
    return {int(values.size()) - 1};
  }
  Value unwrap(GraphValue g) { return values[size_t(g.id)]; }
  int64_t widthOf(GraphValue g) {
    return llvm::cast<RankedTensorType>(unwrap(g).getType()).getDimSize(1);
  }

  GraphValue weight(const std::string &name, ArrayRef<int64_t> shape) override {
    QuantAttr quant;
    if (shape.size() == 2 && c.quant.quantizes(name))
      quant = QuantAttr::get(&ctx, c.quant.bits, c.quant.groupSize ? c.quant.groupSize : shape[1],
                             QuantFormat::Int,
                             codesTileable(c.quant.bits, QuantFormat::Int, shape[0], shape[1]));
    auto op = b.create<WeightOp>(loc, RankedTensorType::get(shape, dtype),
                                 b.getStringAttr(name), quant, IntegerAttr());
    if (currentLayer >= 0)
      op.setLayerAttr(b.getI64IntegerAttr(currentLayer));
    return wrap(op);
  }

  GraphValue linear(GraphValue x, GraphValue w, std::optional<GraphValue> bias,
                    int64_t out) override {
    return wrap(b.create<LinearOp>(loc, act(out), unwrap(x), unwrap(w),
                                   bias ? unwrap(*bias) : Value()));
  }

  GraphValue rmsNorm(GraphValue x, GraphValue w, double eps) override {
    Value v = unwrap(x);
    return wrap(b.create<RmsNormOp>(loc, v.getType(), v, unwrap(w), b.getF64FloatAttr(eps),
                                    c.normWeightOffset != 0.0
                                        ? b.getF64FloatAttr(c.normWeightOffset)
                                        : FloatAttr()));
  }

  GraphValue headRmsNorm(GraphValue x, GraphValue w, double eps) override {
    Value v = unwrap(x);
    return wrap(b.create<HeadRmsNormOp>(loc, v.getType(), v, unwrap(w),
                                        b.getI64IntegerAttr(c.headDim), b.getF64FloatAttr(eps)));
  }

  GraphValue rope(GraphValue x) override {
    Value v = unwrap(x);
    RopeKind kind = ropeKind();
    auto op = b.create<RopeOp>(loc, v.getType(), v, positions,
                               b.getI64IntegerAttr(c.headDim),
                               b.getF64FloatAttr(c.ropeTheta),
                               RopeKindAttr::get(&ctx, kind),
                               FloatAttr(), FloatAttr(), FloatAttr(),
                               IntegerAttr());
    if (c.rope.type != RopeType::Default)
      op.setFactorAttr(b.getF64FloatAttr(c.rope.factor));
    if (c.rope.type == RopeType::Llama3) {
      op.setLowFreqFactorAttr(b.getF64FloatAttr(c.rope.lowFreqFactor));
      op.setHighFreqFactorAttr(b.getF64FloatAttr(c.rope.highFreqFactor));
      op.setOriginalMaxPositionEmbeddingsAttr(
          b.getI64IntegerAttr(c.rope.originalMaxPositionEmbeddings));
    }
    return wrap(op);
  }

  void kvWrite(GraphValue k, GraphValue v, int64_t layer) override {
    b.create<KvWriteOp>(loc, unwrap(k), unwrap(v), positions, slots, cache,
                        b.getI64IntegerAttr(layer));
  }

  GraphValue attention(GraphValue q, int64_t layer) override {
    auto attn = b.create<AttentionOp>(
        loc, act(widthOf(q)), unwrap(q), positions, slots, cache,
        b.getI64IntegerAttr(layer), b.getI64IntegerAttr(c.numHeads),
        b.getI64IntegerAttr(c.numKvHeads), b.getI64IntegerAttr(c.headDim),
        b.getF64FloatAttr(c.attentionScale.value_or(1.0 / std::sqrt(double(c.headDim)))),
        IntegerAttr(), FloatAttr());
    if (std::optional<int64_t> window = c.windowOf(layer))
      attn.setSlidingWindowAttr(b.getI64IntegerAttr(*window));
    if (c.attentionSoftcap)
      attn.setSoftcapAttr(b.getF64FloatAttr(*c.attentionSoftcap));
    return wrap(attn);
  }

  GraphValue add(GraphValue x, GraphValue y) override {
    return wrap(b.create<AddOp>(loc, unwrap(x), unwrap(y)));
  }
  GraphValue mul(GraphValue x, GraphValue y) override {
    return wrap(b.create<MulOp>(loc, unwrap(x), unwrap(y)));
  }
  GraphValue silu(GraphValue x) override { return wrap(b.create<SiluOp>(loc, unwrap(x))); }
  GraphValue geluTanh(GraphValue x) override {
    return wrap(b.create<GeluTanhOp>(loc, unwrap(x)));
  }
  GraphValue embedding(GraphValue table) override {
    return wrap(b.create<EmbeddingOp>(
        loc, act(c.hiddenSize), unwrap(table), ids,
        c.scaleEmbedding ? b.getF64FloatAttr(std::sqrt(double(c.hiddenSize))) : FloatAttr()));
  }

  RopeKind ropeKind() const {
    return c.rope.type == RopeType::Llama3   ? RopeKind::Llama3
           : c.rope.type == RopeType::Linear ? RopeKind::Linear
                                             : RopeKind::Default;
  }

  ModelAttr modelAttr() {
    return ModelAttr::get(&ctx, c.architecture, c.name, dtype, c.hiddenSize, c.intermediateSize,
                          c.numLayers, c.numHeads, c.numKvHeads, c.headDim, c.vocabSize,
                          c.maxPositionEmbeddings, b.getF64FloatAttr(c.rmsNormEps),
                          b.getF64FloatAttr(c.ropeTheta), ropeKind(),
                          b.getBoolAttr(c.tieWordEmbeddings), b.getBoolAttr(c.qkvBias),
                          b.getBoolAttr(c.oBias), b.getBoolAttr(c.mlpBias), c.slidingWindow);
  }

  void build(ModuleOp module, const ImportOptions &options) {
    module->setAttr("weft.model", modelAttr());
    b.setInsertionPointToEnd(module.getBody());
    auto tokens = RankedTensorType::get({ShapedType::kDynamic}, b.getI32Type());
    auto perTokenF32 = RankedTensorType::get({ShapedType::kDynamic}, b.getF32Type());
    auto cacheType = KvCacheType::get(&ctx, c.numLayers, c.numKvHeads,
                                      c.headDim, dtype);
    auto logitsType = RankedTensorType::get({ShapedType::kDynamic, c.vocabSize},
                                            b.getF32Type());
    SmallVector<Type> inputs = {tokens, tokens, tokens, cacheType};
    if (options.sampling)
      inputs.append({perTokenF32, tokens, perTokenF32, perTokenF32});
    auto fnType = b.getFunctionType(inputs, {logitsType, tokens});
    auto fn = b.create<func::FuncOp>(loc, "forward", fnType);
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    ids = entry->getArgument(0);
    positions = entry->getArgument(1);
    slots = entry->getArgument(2);
    cache = entry->getArgument(3);

    DecoderOutputs out = buildDecoder(*this, c, architectureOf(c));
    Value n = unwrap(out.hidden), head = unwrap(out.head);
    Value logits = b.create<LogitsOp>(
        loc, logitsType, n, head,
        c.finalLogitSoftcap ? b.getF64FloatAttr(*c.finalLogitSoftcap) : FloatAttr());
    Value next;
    if (options.sampling)
      next = b.create<SampleOp>(loc, tokens, logits, entry->getArgument(4),
                                entry->getArgument(5), entry->getArgument(6),
                                entry->getArgument(7));
    else
      next = b.create<ArgmaxOp>(loc, tokens, logits);
    b.create<func::ReturnOp>(loc, ValueRange{logits, next});
  }

private:
  MLIRContext &ctx;
  const ModelConfig &c;
  OpBuilder &b;
  Location loc;
  Type dtype;
  Value ids, positions, slots, cache; // @forward's arguments
  std::vector<Value> values;          // what GraphValue ids name
};

} // namespace

OwningOpRef<ModuleOp> importModel(MLIRContext &context,
                                  const ModelConfig &config,
                                  const ImportOptions &options) {
  context.loadDialect<WeftDialect, func::FuncDialect>();
  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  WeftGraphBuilder(context, config, b).build(*module, options);
  return module;
}

llvm::Expected<ModelConfig> modelConfigFromModule(ModuleOp module) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "module attribute 'weft.model': " + msg);
  };
  auto m = module->getAttrOfType<ModelAttr>("weft.model");
  if (!m)
    return fail("missing or not a #weft.model (the module was not produced by the importer)");
  ModelConfig c;
  c.architecture = m.getArchitecture().str();
  c.name = m.getName().str();
  const Architecture *arch = findArchitecture(c.architecture);
  if (!arch)
    return fail("unknown architecture '" + c.architecture + "'");
  c.family = arch->family;
  c.hiddenSize = m.getHiddenSize();
  c.intermediateSize = m.getIntermediateSize();
  c.numLayers = m.getNumLayers();
  c.numHeads = m.getNumHeads();
  c.numKvHeads = m.getNumKvHeads();
  c.headDim = m.getHeadDim();
  c.vocabSize = m.getVocabSize();
  c.maxPositionEmbeddings = m.getMaxPositionEmbeddings();
  c.slidingWindow = m.getSlidingWindow();
  c.rmsNormEps = m.getRmsNormEps().getValueAsDouble();
  c.ropeTheta = m.getRopeTheta().getValueAsDouble();
  // The rope scaling's parameters live on weft.rope; the kind alone would
  // be a half-filled RopeScaling, so c.rope stays the default.
  c.tieWordEmbeddings = m.getTieWordEmbeddings().getValue();
  c.qkvBias = m.getQkvBias().getValue();
  c.oBias = m.getOBias().getValue();
  c.mlpBias = m.getMlpBias().getValue();
  Type t = m.getDtype();
  c.dtype = t.isF16() ? io::DType::F16 : t.isBF16() ? io::DType::BF16 : io::DType::F32;
  return c;
}

void printGraphSummary(ModuleOp module, const ModelConfig &c,
                       llvm::raw_ostream &os) {
  llvm::MapVector<StringRef, unsigned> counts;
  module.walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "weft")
      ++counts[op->getName().getStringRef()];
  });
  uint64_t params = parameterCount(c);
  os << "model        " << c.name << " (" << c.architecture << ")\n";
  os << llvm::formatv("layers       {0}, hidden {1}, intermediate {2}\n",
                      c.numLayers, c.hiddenSize, c.intermediateSize);
  os << llvm::formatv("attention    {0} heads, {1} KV heads, head_dim {2}{3}\n",
                      c.numHeads, c.numKvHeads, c.headDim,
                      !c.slidingWindow ? std::string()
                      : c.slidingLayers.empty()
                          ? llvm::formatv(", window {0}", *c.slidingWindow).str()
                          : llvm::formatv(", window {0} on {1} of {2} layers", *c.slidingWindow,
                                          llvm::count(c.slidingLayers, true), c.numLayers)
                                .str());
  os << llvm::format("rope         theta %g, scaling %s", c.ropeTheta,
                     ropeTypeName(c.rope.type));
  if (c.rope.type != RopeType::Default)
    os << llvm::format(" (factor %g)", c.rope.factor);
  os << "\n";
  os << llvm::formatv("vocab        {0}{1}\n", c.vocabSize,
                      c.tieWordEmbeddings ? " (tied embeddings)" : "");
  if (c.quant.active())
    os << llvm::formatv("weights      {0} parameters, {1}: projections {2}, the rest {3}\n",
                        params, formatBytes(double(checkpointBytes(c))), c.quant.describe(),
                        io::dtypeName(c.dtype));
  else
    os << llvm::formatv("weights      {0} parameters, {1} in {2}\n", params,
                        formatBytes(double(params) * io::dtypeSize(c.dtype)),
                        io::dtypeName(c.dtype));
  os << llvm::formatv("kv cache     {0} per token\n",
                      formatBytes(double(2 * c.numLayers * c.kvWidth() *
                                        io::dtypeSize(c.dtype))));
  os << "ops         ";
  unsigned total = 0;
  for (auto &[name, n] : counts) {
    os << " " << name << "=" << n;
    total += n;
  }
  os << " (total " << total << ")\n";
}

namespace {
// The #weft.quant of an [out, in] matrix quantized here: 4-bit integers in
// groups of kCompileTimeGroup inputs (the whole row where that does not
// divide it), 8-bit integers and E4M3 with one group per row.
QuantAttr compileTimeQuant(MLIRContext *ctx, RankedTensorType t, int bits, QuantFormat format) {
  const int64_t in = t.getDimSize(1);
  const int64_t group =
      bits == 4 && format == QuantFormat::Int && in % kCompileTimeGroup == 0 ? kCompileTimeGroup
                                                                            : in;
  return QuantAttr::get(ctx, bits, group, format, codesTileable(bits, format, t.getDimSize(0), in));
}
} // namespace

void quantizeProjections(ModuleOp module, int bits, QuantFormat format) {
  module.walk([&](WeightOp w) {
    RankedTensorType t = w.getType();
    if (t.getRank() != 2 || !w.getName().ends_with("_proj.weight"))
      return;
    w.setQuantAttr(compileTimeQuant(module.getContext(), t, bits, format));
  });
}

llvm::Error quantizeLmHead(ModuleOp module, int bits, QuantFormat format) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  // The head is the weight operand of each weft.logits, or once the graph
  // is fused the operand of its region that the block argument stands for.
  llvm::SmallVector<OpOperand *> uses;
  module.walk([&](LogitsOp logits) {
    OpOperand *use = &logits->getOpOperand(1);
    if (auto arg = dyn_cast<BlockArgument>(use->get()))
      if (auto region = dyn_cast<FusionOp>(arg.getOwner()->getParentOp()))
        use = &region->getOpOperand(arg.getArgNumber());
    uses.push_back(use);
  });
  if (uses.empty())
    return fail("--lm-head-dtype: the graph has no LM head (weft.logits)");
  for (OpOperand *use : uses) {
    auto w = use->get().getDefiningOp<WeightOp>();
    if (!w)
      return fail("--lm-head-dtype: the LM head is not a weight of the checkpoint");
    if (w.getQuantAttr())
      continue; // marked already (by an earlier call)
    QuantAttr quant = compileTimeQuant(module.getContext(), w.getType(), bits, format);
    // Tied embeddings: the embedding keeps reading the 16-bit table, the
    // head reads a quantized copy of it (a weight op of its own).
    bool shared = llvm::any_of(w->getUses(), [&](OpOperand &u) { return &u != use; });
    if (shared) {
      OpBuilder b(use->getOwner());
      auto copy = cast<WeightOp>(b.clone(*w));
      copy.setQuantAttr(quant);
      use->set(copy.getResult());
    } else {
      w.setQuantAttr(quant);
    }
  }
  return llvm::Error::success();
}

} // namespace weft

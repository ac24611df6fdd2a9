// The weft dialect: registration, type and op verifiers.
#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace weft;

#include "dialects/Weft/IR/WeftDialect.cpp.inc"

void WeftDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Weft/IR/WeftAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/Weft/IR/WeftTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/Weft/IR/WeftOps.cpp.inc"
      >();
}

#include "dialects/Weft/IR/WeftEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Weft/IR/WeftAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/Weft/IR/WeftTypes.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

RankedTensorType rankedType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

// Two token dimensions agree when equal or when either is still dynamic.
bool tokenDimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

// Model dimensions (everything but the token dimension) must be static.
LogicalResult verifyStaticFeatureDim(Operation *op, Value v, StringRef what) {
  RankedTensorType t = rankedType(v);
  if (t.getRank() >= 2 && ShapedType::isDynamic(t.getShape().back()))
    return op->emitOpError() << what << " must have a static feature dimension, got " << t;
  return success();
}

LogicalResult verifyTokens(Operation *op, Value activation, Value tokens,
                           StringRef what) {
  int64_t a = rankedType(activation).getDimSize(0);
  int64_t b = rankedType(tokens).getDimSize(0);
  if (!tokenDimsCompatible(a, b))
    return op->emitOpError() << "token count of " << what << " (" << b
                             << ") does not match the activations (" << a << ")";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// KvCacheType
//===----------------------------------------------------------------------===//

LogicalResult KvCacheType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t layers, int64_t kvHeads,
                                  int64_t headDim, Type dtype) {
  if (layers <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitError() << "kv_cache dimensions must be positive, got layers = "
                       << layers << ", kv_heads = " << kvHeads
                       << ", head_dim = " << headDim;
  if (!llvm::isa<FloatType, IntegerType>(dtype))
    return emitError() << "kv_cache dtype must be a float or integer type, got "
                       << dtype;
  return success();
}

//===----------------------------------------------------------------------===//
// WeightOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("requires a non-empty weight name");
  RankedTensorType t = getResult().getType();
  if (!t.hasStaticShape())
    return emitOpError() << "weight '" << getName()
                         << "' must have a static shape, got " << t;
  if (t.getNumElements() == 0)
    return emitOpError() << "weight '" << getName() << "' is empty";
  if (QuantAttr q = getQuantAttr()) {
    if (t.getRank() != 2 || !llvm::isa<FloatType>(t.getElementType()))
      return emitOpError() << "quantized weight '" << getName()
                           << "' must be a float matrix, got " << t;
    if (t.getDimSize(1) % q.getGroup() != 0)
      return emitOpError() << "quantized weight '" << getName() << "': group " << q.getGroup()
                           << " does not divide its " << t.getDimSize(1) << " inputs";
    if (q.getFormat() == QuantFormat::E4M3 && q.getGroup() != t.getDimSize(1))
      return emitOpError() << "quantized weight '" << getName()
                           << "': e4m3 codes have one scale per row, so group must be its "
                           << t.getDimSize(1) << " inputs, got " << q.getGroup();
    if (q.getTiled() &&
        !codesTileable(q.getBits(), q.getFormat(), t.getDimSize(0), t.getDimSize(1)))
      return emitOpError() << "quantized weight '" << getName() << "': " << t.getDimSize(0)
                           << " x " << t.getDimSize(1)
                           << " codes cannot be stored in tiles of 16 rows and 128 inputs";
  }
  return success();
}

LogicalResult ModelAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                                StringRef architecture, StringRef, Type dtype, int64_t hidden,
                                int64_t intermediate, int64_t layers, int64_t heads,
                                int64_t kvHeads, int64_t headDim, int64_t vocab,
                                int64_t positions, FloatAttr eps, FloatAttr theta, RopeKind,
                                BoolAttr, BoolAttr, BoolAttr, BoolAttr,
                                std::optional<int64_t> window) {
  if (architecture.empty())
    return emitError() << "#weft.model: empty architecture";
  if (!dtype.isF16() && !dtype.isBF16() && !dtype.isF32())
    return emitError() << "#weft.model: dtype must be f16, bf16 or f32, got " << dtype;
  std::pair<const char *, int64_t> dims[] = {
      {"hidden_size", hidden},     {"intermediate_size", intermediate},
      {"num_layers", layers},      {"num_heads", heads},
      {"num_kv_heads", kvHeads},   {"head_dim", headDim},
      {"vocab_size", vocab},       {"max_position_embeddings", positions}};
  for (auto [name, v] : dims)
    if (v <= 0)
      return emitError() << "#weft.model: " << name << " must be positive, got " << v;
  if (window && *window <= 0)
    return emitError() << "#weft.model: sliding_window must be positive, got " << *window;
  if (!eps || !theta)
    return emitError() << "#weft.model: rms_norm_eps and rope_theta are required";
  return success();
}

QuantAttr weft::quantOf(Value weight) {
  if (auto arg = dyn_cast<BlockArgument>(weight)) {
    auto fn = dyn_cast_or_null<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (fn && arg.getOwner()->isEntryBlock())
      return fn.getArgAttrOfType<QuantAttr>(arg.getArgNumber(), kQuantArgAttr);
    return {};
  }
  if (auto w = weight.getDefiningOp<WeightOp>())
    return w.getQuantAttr();
  if (auto c = weight.getDefiningOp<WeightConcatOp>())
    if (!c.getInputs().empty())
      if (auto w = c.getInputs().front().getDefiningOp<WeightOp>())
        return w.getQuantAttr();
  return {};
}

bool weft::codesTileable(int64_t bits, QuantFormat format, int64_t out, int64_t in) {
  return format == QuantFormat::Int && bits == 4 && out % 16 == 0 && in % 128 == 0;
}

LogicalResult QuantAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                                int64_t bits, int64_t group, QuantFormat format, bool tiled) {
  if (tiled && (format != QuantFormat::Int || bits != 4))
    return emitError() << "#weft.quant: only 4-bit integer codes are stored tiled";
  if (format == QuantFormat::E4M3 && bits != 8)
    return emitError() << "#weft.quant: e4m3 codes are 8 bits, got " << bits;
  if (bits != 4 && bits != 8)
    return emitError() << "#weft.quant: bits must be 4 or 8, got " << bits;
  if (group <= 0 || group % 32 != 0)
    return emitError() << "#weft.quant: group must be a positive multiple of 32, got " << group;
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

double EmbeddingOp::roundedScale() {
  if (!getScale())
    return 1.0;
  llvm::APFloat scale(getScale()->convertToDouble());
  Type type = getResult().getType().getElementType();
  bool lost = false;
  if (type.isBF16() || type.isF16())
    scale.convert(type.isBF16() ? llvm::APFloat::BFloat() : llvm::APFloat::IEEEhalf(),
                  llvm::APFloat::rmNearestTiesToEven, &lost);
  scale.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return scale.convertToDouble();
}

LogicalResult EmbeddingOp::verify() {
  if (getScale() && !(getScale()->convertToDouble() > 0.0 &&
                      std::isfinite(getScale()->convertToDouble())))
    return emitOpError("scale must be positive");
  RankedTensorType table = getTable().getType();
  RankedTensorType result = getResult().getType();
  if (table.getRank() != 2)
    return emitOpError() << "table must be rank 2 (vocab x hidden), got " << table;
  if (result.getDimSize(1) != table.getDimSize(1))
    return emitOpError() << "result width " << result.getDimSize(1)
                         << " does not match the table's hidden size "
                         << table.getDimSize(1);
  return verifyTokens(*this, getResult(), getIds(), "ids");
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::verify() {
  if (failed(verifyStaticFeatureDim(*this, getInput(), "input")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  RankedTensorType w = getWeight().getType();
  int64_t width = getInput().getType().getDimSize(1);
  if (w.getRank() != 1 || w.getDimSize(0) != width)
    return emitOpError() << "weight must be tensor<" << width << "x...>, got " << w;
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError("epsilon must be positive");
  if (!std::isfinite(weightOffsetOrZero()))
    return emitOpError("weight_offset must be finite");
  return success();
}

//===----------------------------------------------------------------------===//
// HeadRmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult HeadRmsNormOp::verify() {
  if (failed(verifyStaticFeatureDim(*this, getInput(), "input")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  int64_t dim = getHeadDim(), width = getInput().getType().getDimSize(1);
  if (width % dim != 0)
    return emitOpError() << "input width " << width << " is not a multiple of head_dim " << dim;
  RankedTensorType w = getWeight().getType();
  if (w.getRank() != 1 || w.getDimSize(0) != dim)
    return emitOpError() << "weight must be tensor<" << dim << "x...>, got " << w;
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError("epsilon must be positive");
  return success();
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  if (failed(verifyStaticFeatureDim(*this, getInput(), "input")))
    return failure();
  RankedTensorType in = getInput().getType();
  RankedTensorType w = getWeight().getType();
  RankedTensorType out = getResult().getType();
  if (w.getRank() != 2)
    return emitOpError() << "weight must be rank 2 (out x in), got " << w;
  if (w.getDimSize(1) != in.getDimSize(1))
    return emitOpError() << "weight " << w << " does not match input width "
                         << in.getDimSize(1);
  if (out.getDimSize(1) != w.getDimSize(0))
    return emitOpError() << "result width " << out.getDimSize(1)
                         << " does not match the weight's output size "
                         << w.getDimSize(0);
  if (!tokenDimsCompatible(in.getDimSize(0), out.getDimSize(0)))
    return emitOpError("result token count does not match the input");
  if (Value bias = getBias()) {
    RankedTensorType b = llvm::cast<RankedTensorType>(bias.getType());
    if (b.getRank() != 1 || b.getDimSize(0) != w.getDimSize(0))
      return emitOpError() << "bias must be tensor<" << w.getDimSize(0)
                           << "x...>, got " << b;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// RopeOp
//===----------------------------------------------------------------------===//

::llvm::Expected<std::vector<double>> RopeOp::inverseFrequencies() {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg.str());
  };
  int64_t dim = getHeadDim();
  double theta = getTheta().convertToDouble();
  std::vector<double> inv(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    inv[size_t(i)] = std::pow(theta, -double(2 * i) / double(dim));
  RopeKind kind = getRopeType();
  if (kind == RopeKind::Default)
    return inv;
  std::string type = stringifyRopeKind(kind).str();
  if (!getFactor())
    return fail("rope_type \"" + type + "\" requires 'factor'");
  double factor = getFactor()->convertToDouble();
  if (kind == RopeKind::Linear) {
    for (double &f : inv)
      f /= factor;
    return inv;
  }
  if (!getLowFreqFactor() || !getHighFreqFactor() || !getOriginalMaxPositionEmbeddings())
    return fail("rope_type \"llama3\" requires 'low_freq_factor', 'high_freq_factor' and "
                "'original_max_position_embeddings'");
  double low = getLowFreqFactor()->convertToDouble();
  double high = getHighFreqFactor()->convertToDouble();
  double original = double(*getOriginalMaxPositionEmbeddings());
  // Long wavelengths are slowed by `factor`, short ones kept, and the band
  // between blends the two.
  constexpr double kPi = 3.14159265358979323846;
  for (double &f : inv) {
    double wavelength = 2.0 * kPi / f;
    if (wavelength > original / low) {
      f /= factor;
    } else if (wavelength >= original / high) {
      double smooth = (original / wavelength - low) / (high - low);
      f = (1.0 - smooth) * f / factor + smooth * f;
    }
  }
  return inv;
}

LogicalResult RopeOp::verify() {
  if (failed(verifyStaticFeatureDim(*this, getInput(), "input")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  int64_t headDim = getHeadDim();
  int64_t width = getInput().getType().getDimSize(1);
  if (headDim % 2 != 0)
    return emitOpError() << "head_dim must be even, got " << headDim;
  if (width % headDim != 0)
    return emitOpError() << "input width " << width
                         << " is not a multiple of head_dim " << headDim;
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError("theta must be positive");
  switch (getRopeType()) {
  case RopeKind::Default:
    if (getFactor() || getLowFreqFactor() || getHighFreqFactor() ||
        getOriginalMaxPositionEmbeddings())
      return emitOpError("rope_type \"default\" takes no scaling parameters");
    break;
  case RopeKind::Linear:
    if (!getFactor())
      return emitOpError("rope_type \"linear\" requires 'factor'");
    break;
  case RopeKind::Llama3:
    if (!getFactor() || !getLowFreqFactor() || !getHighFreqFactor() ||
        !getOriginalMaxPositionEmbeddings())
      return emitOpError(
          "rope_type \"llama3\" requires 'factor', 'low_freq_factor', "
          "'high_freq_factor' and 'original_max_position_embeddings'");
    if (*getHighFreqFactor() <= *getLowFreqFactor())
      return emitOpError("high_freq_factor must exceed low_freq_factor");
    break;
  }

  if (getFactor() && !(getFactor()->convertToDouble() > 0.0))
    return emitOpError("factor must be positive");
  return verifyTokens(*this, getInput(), getPositions(), "positions");
}

//===----------------------------------------------------------------------===//
// KvWriteOp
//===----------------------------------------------------------------------===//

static LogicalResult verifyAgainstCache(Operation *op, KvCacheType cache,
                                        int64_t layer) {
  if (layer >= cache.getLayers())
    return op->emitOpError() << "layer " << layer
                             << " is out of range for a cache of "
                             << cache.getLayers() << " layers";
  return success();
}

LogicalResult KvWriteOp::verify() {
  KvCacheType cache = getCache().getType();
  if (failed(verifyAgainstCache(*this, cache, getLayer())))
    return failure();
  int64_t width = cache.getKvHeads() * cache.getHeadDim();
  for (auto [v, what] : {std::pair<Value, StringRef>{getKey(), "key"},
                         {getValue(), "value"}}) {
    if (rankedType(v).getDimSize(1) != width)
      return emitOpError() << what << " width " << rankedType(v).getDimSize(1)
                           << " does not match the cache's kv_heads * head_dim = "
                           << width;
  }
  if (getKey().getType() != getValue().getType())
    return emitOpError("key and value must have the same type");
  if (failed(verifyTokens(*this, getKey(), getPositions(), "positions")) ||
      failed(verifyTokens(*this, getKey(), getSlots(), "slots")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  KvCacheType cache = getCache().getType();
  if (failed(verifyAgainstCache(*this, cache, getLayer())))
    return failure();
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(), dim = getHeadDim();
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads " << heads
                         << " is not a multiple of num_kv_heads " << kvHeads;
  if (kvHeads != cache.getKvHeads() || dim != cache.getHeadDim())
    return emitOpError() << "num_kv_heads " << kvHeads << " and head_dim "
                         << dim << " do not match the cache ("
                         << cache.getKvHeads() << ", " << cache.getHeadDim()
                         << ")";
  for (auto [v, what] : {std::pair<Value, StringRef>{getQuery(), "query"},
                         {getResult(), "result"}}) {
    if (rankedType(v).getDimSize(1) != heads * dim)
      return emitOpError() << what << " width " << rankedType(v).getDimSize(1)
                           << " does not match num_heads * head_dim = "
                           << heads * dim;
  }
  if (!(getScale().convertToDouble() > 0.0))
    return emitOpError("scale must be positive");
  if (getSoftcap() && !(getSoftcap()->convertToDouble() > 0.0 &&
                        std::isfinite(getSoftcap()->convertToDouble())))
    return emitOpError("softcap must be positive");
  if (failed(verifyTokens(*this, getQuery(), getPositions(), "positions")) ||
      failed(verifyTokens(*this, getQuery(), getSlots(), "slots")) ||
      failed(verifyTokens(*this, getQuery(), getResult(), "result")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// LogitsOp, ArgmaxOp, SampleOp
//===----------------------------------------------------------------------===//

LogicalResult LogitsOp::verify() {
  if (getSoftcap() && !(getSoftcap()->convertToDouble() > 0.0 &&
                        std::isfinite(getSoftcap()->convertToDouble())))
    return emitOpError("softcap must be positive");
  RankedTensorType in = getInput().getType();
  RankedTensorType w = getWeight().getType();
  RankedTensorType out = getResult().getType();
  if (w.getRank() != 2 || w.getDimSize(1) != in.getDimSize(1))
    return emitOpError() << "weight must be tensor<vocab x " << in.getDimSize(1)
                         << ">, got " << w;
  if (out.getDimSize(1) != w.getDimSize(0))
    return emitOpError() << "result width " << out.getDimSize(1)
                         << " does not match the vocabulary size "
                         << w.getDimSize(0);
  return verifyTokens(*this, getInput(), getResult(), "result");
}

LogicalResult ArgmaxOp::verify() {
  return verifyTokens(*this, getLogits(), getResult(), "result");
}

LogicalResult SampleOp::verify() {
  for (Value v : {getTemperature(), getTopK(), getTopP(), getUniform(),
                  getResult()})
    if (failed(verifyTokens(*this, getLogits(), v, "a per-token operand")))
      return failure();
  return success();
}


//===----------------------------------------------------------------------===//
// WeightConcatOp, SplitOp
//===----------------------------------------------------------------------===//

LogicalResult WeightConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("requires at least one input");
  RankedTensorType result = getResult().getType();
  int64_t axis = getAxis();
  if (axis >= result.getRank())
    return emitOpError() << "axis " << axis << " is out of range for rank "
                         << result.getRank();
  int64_t total = 0;
  for (Value v : getInputs()) {
    RankedTensorType t = rankedType(v);
    if (t.getRank() != result.getRank() ||
        t.getElementType() != result.getElementType())
      return emitOpError() << "input " << t << " does not match result " << result;
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != result.getDimSize(d))
        return emitOpError() << "input " << t << " differs from result " << result
                             << " outside axis " << axis;
    total += t.getDimSize(axis);
  }
  if (total != result.getDimSize(axis))
    return emitOpError() << "inputs add up to " << total << " along axis "
                         << axis << ", result has " << result.getDimSize(axis);
  return success();
}

LogicalResult SplitOp::verify() {
  ArrayRef<int64_t> sizes = getSizes();
  if (sizes.size() != getResults().size())
    return emitOpError() << "has " << getResults().size() << " results but "
                         << sizes.size() << " sizes";
  RankedTensorType in = getInput().getType();
  int64_t total = 0;
  for (auto [size, result] : llvm::zip(sizes, getResults())) {
    RankedTensorType t = rankedType(result);
    if (size <= 0 || t.getDimSize(1) != size)
      return emitOpError() << "result " << t << " does not have size " << size;
    if (t.getElementType() != in.getElementType() ||
        !tokenDimsCompatible(t.getDimSize(0), in.getDimSize(0)))
      return emitOpError() << "result " << t << " does not match input " << in;
    total += size;
  }
  if (total != in.getDimSize(1))
    return emitOpError() << "sizes add up to " << total << ", input width is "
                         << in.getDimSize(1);
  return success();
}

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments for " << getInputs().size() << " inputs";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError() << "body argument type " << arg.getType()
                           << " does not match input type " << input.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end with weft.yield");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("weft.yield types do not match the results");
  if (getKind().empty())
    return emitOpError("requires a non-empty kind");
  return success();
}

#define GET_OP_CLASSES
#include "dialects/Weft/IR/WeftOps.cpp.inc"

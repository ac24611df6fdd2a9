// CUDA C++ for the non-attention fusion regions: GEMV-style projections for
// decode buckets, RMSNorm + cuBLASLt GEMM + epilogue kernels for prefill.
#include "targets/CUDA/KernelEmitter.h"
#include "targets/CUDA/EmitterSupport.h"

#ifdef WEFT_HAVE_ATTENTION_EMITTER
#include "targets/CUDA/AttentionEmitter.h"
#endif

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

namespace weft::cuda {

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F32:
    return "f32";
  }
  return "?";
}

std::optional<ElementType> elementTypeOf(mlir::Type type) {
  if (auto t = llvm::dyn_cast<mlir::ShapedType>(type))
    type = t.getElementType();
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  if (type.isF32())
    return ElementType::F32;
  return std::nullopt;
}

const char *cudaType(ElementType type) {
  switch (type) {
  case ElementType::F16:
    return "__half";
  case ElementType::BF16:
    return "__nv_bfloat16";
  case ElementType::F32:
    return "float";
  }
  return "float";
}

int64_t bytesOf(ElementType type) { return type == ElementType::F32 ? 4 : 2; }

namespace {
// `v` printed with `fmt`, always with a decimal point or exponent.
std::string formatDouble(const char *fmt, double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format(fmt, v);
  os.flush();
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}
} // namespace

std::string floatLiteral(double v) { return formatDouble("%.9g", v) + "f"; }

namespace detail {

using mlir::BlockArgument;
using mlir::Operation;
using mlir::RankedTensorType;
using mlir::Value;

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

llvm::Error regionError(FusionOp region, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("region kind '" + region.getKind() + "': " + why).str());
}




int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

// Elements per vector access: 16 bytes of the widest type, halved until it
// divides every extent the accesses step through.
int64_t vectorWidth(int64_t widestBytes, llvm::ArrayRef<int64_t> extents) {
  int64_t vec = 16 / widestBytes;
  while (vec > 1 && llvm::any_of(extents, [&](int64_t e) { return e % vec != 0; }))
    vec /= 2;
  return vec;
}

std::string typeString(mlir::Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}


// A double literal that reads back as the same double.
std::string doubleLiteral(double v) { return formatDouble("%.17g", v); }

// Rank-2 static shape of a tensor value, or nothing.
std::optional<std::pair<int64_t, int64_t>> matrixShape(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() != 2 || !t.hasStaticShape())
    return std::nullopt;
  return std::make_pair(t.getDimSize(0), t.getDimSize(1));
}

// Index of `v` among the region's block arguments (= the fusion's
// operands), or -1 when it is computed in the body.
int64_t inputIndex(FusionOp region, Value v) {
  auto arg = llvm::dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &region.getBody().front())
    return -1;
  return arg.getArgNumber();
}

ParamBinding binding(ParamBinding::Kind kind, int64_t index, llvm::StringRef name) {
  ParamBinding b;
  b.kind = kind;
  b.index = index;
  b.name = name.str();
  return b;
}

ParamBinding scratchBinding(int64_t index, uint64_t bytes, llvm::StringRef name) {
  ParamBinding b = binding(ParamBinding::Kind::Scratch, index, name);
  b.bytes = bytes;
  return b;
}

ParamBinding nullBinding(llvm::StringRef name) {
  ParamBinding b = binding(ParamBinding::Kind::Scalar, 0, name);
  b.value = 0;
  return b;
}

// Kernel names are C identifiers: region kinds are, but be safe.
std::string identifier(llvm::StringRef s) {
  std::string out;
  for (char c : s)
    out += llvm::isAlnum(c) ? char(llvm::toLower(c)) : '_';
  return out;
}

EmittedKernel libraryKernel(llvm::StringRef regionKind, llvm::StringRef baseName,
                            LibraryKernel k) {
  std::string source;
  llvm::raw_string_ostream os(source);
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(k.what).split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines)
    os << "// " << line << "\n";
  os << "#include \"" << k.header << "\"\n\n" << k.preamble;
  if (!k.preamble.empty())
    os << "\n";
  os << "struct Config {\n"
     << k.config
     << "  static constexpr bool RELEASE_EARLY = " << (k.releaseEarly ? "true" : "false")
     << ";\n"
     << "};\n";
  os.flush();
  uint64_t hash = llvm::xxh3_64bits(llvm::StringRef(source + '\0' + k.instance));
  EmittedKernel out;
  llvm::raw_string_ostream nos(out.name);
  nos << baseName;
  if (k.hashName)
    nos << "_" << llvm::format_hex_no_prefix(hash >> 16, 12);
  nos.flush();
  out.regionKind = regionKind.str();
  out.source = std::move(source);
  out.instance = std::move(k.instance);
  out.grid = k.grid;
  out.block = k.block;
  out.params = std::move(k.params);
  out.sharedBytes = k.sharedBytes;
  out.releaseEarly = k.releaseEarly;
  return out;
}

std::string moreArgs(llvm::StringRef type, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += ", " + type.str();
  return out;
}

EmittedStep kernelStep(EmittedKernel k) {
  EmittedStep s;
  s.kernel = std::move(k);
  return s;
}

// A 4-bit layer's RoPE region of one token (the QKV projection with RoPE in
// its epilogue, or RoPE + KV write alone): its kernels release their
// successor early, like its projections do (the decode attention kernels
// do so themselves).
bool releasesEarlyAsFourBitRope(FusionOp region, const EmitOptions &o) {
  if (!o.fourBitProjections)
    return false;
  for (Operation &op : region.getBody().front().without_terminator())
    if (auto rope = llvm::dyn_cast<RopeOp>(op))
      if (auto type = llvm::dyn_cast<mlir::RankedTensorType>(rope.getResult().getType()))
        return type.getRank() == 2 && type.getDimSize(0) == 1;
  return false;
}

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

//===----------------------------------------------------------------------===//
// Projection epilogues (weft/epilogue.cuh), shared by the GEMV kernel, its
// split-K reduce kernel and the prefill epilogue and split kernels
//===----------------------------------------------------------------------===//

// A projection's epilogue as its kernel's Config names it: the pointers it
// takes (the entry's trailing pack, in order) and the lines that compose it.
struct EpilogueCode {
  std::vector<ParamBinding> params;
  std::vector<std::string> types; // each pointer's pointee type ("const __half")
  std::string preamble;           // before Config: head groups, rope tables
  std::string config;             // Config's lines: `using Epilogue = ...` and its constants
  std::string parts;              // Columns<...> of each output part, joined (split copies)

  // Adds a pointer; returns its index in the pack.
  int64_t add(std::string type, ParamBinding b) {
    params.push_back(std::move(b));
    types.push_back(std::move(type));
    return int64_t(params.size()) - 1;
  }
  // Adds `results` as pointers of `type`; returns "FIRST, COUNT".
  std::string addResults(llvm::StringRef type, llvm::ArrayRef<int64_t> results,
                         const std::string &base) {
    int64_t first = int64_t(params.size());
    for (auto [c, r] : llvm::enumerate(results)) {
      std::string n = c ? base + "_" + std::to_string(c) : base;
      add(type.str(), binding(ParamBinding::Kind::RegionResult, r, n));
    }
    return std::to_string(first) + ", " + std::to_string(results.size());
  }
  // ", T0, T1, ...": the entry's pack after Config.
  std::string pack() const {
    std::string out;
    for (const std::string &t : types)
      out += ", " + t;
    return out;
  }
};

std::string columnsOf(int64_t offset, int64_t size, const std::string &results) {
  return "weft::kernels::Columns<" + std::to_string(offset) + ", " + std::to_string(size) + ", " +
         results + ">";
}

// The rope frequency tables, computed in double by the compiler, as one
// __constant__ array and the Config function that reads it.
void addRopeTables(const std::vector<std::vector<double>> &tables, int64_t half,
                   std::string &preamble, std::string &config) {
  llvm::raw_string_ostream os(preamble);
  os << "__constant__ double wf_inv_freq[" << tables.size() << "][" << half << "] = {";
  for (auto [i, table] : llvm::enumerate(tables)) {
    os << (i ? ", {" : "{");
    for (auto [j, f] : llvm::enumerate(table))
      os << (j ? (j % 4 ? ", " : ",\n    ") : "\n    ") << doubleLiteral(f);
    os << "}";
  }
  os << "};\n";
  os.flush();
  config += "  static __device__ __forceinline__ double invFreq(int table, int i) {\n"
            "    return wf_inv_freq[table][i];\n"
            "  }\n";
}

// The cache geometry a KV-cache write reads from Config (rope_kv_write.cuh).
std::string cacheConfig(int64_t kvHeads, ElementType cacheType, const EmitOptions &o) {
  return "  static constexpr int KV_HEADS = " + std::to_string(kvHeads) +
         ", BLOCK_TOKENS = " + std::to_string(o.blockTokens) +
         ", MAX_BLOCKS = " + std::to_string(o.maxBlocksPerSequence) +
         ", MAX_SEQUENCES = " + std::to_string(o.maxSequences) + ";\n" +
         "  using cache_t = " + cudaType(cacheType) + ";\n";
}

// `logitsScratch`: the scratch id of f32 logits that are not a region
// result. `o`: the cache geometry, for a RoPE epilogue's cache writes.
EpilogueCode projectionEpilogue(const Projection &p, bool withBias, int64_t logitsScratch,
                                const EmitOptions &o) {
  EpilogueCode e;
  std::string bias = "weft::kernels::NoBias";
  if (withBias && p.biasIn >= 0)
    bias = "weft::kernels::Bias<" +
           std::to_string(e.add(std::string("const ") + cudaType(p.biasType),
                                binding(ParamBinding::Kind::RegionInput, p.biasIn, "bias"))) +
           ">";
  auto columnEpilogue = [&](const std::string &value, const std::string &parts) {
    e.config += "  using Epilogue = weft::kernels::ColumnEpilogue<" + bias + ", " + value + ",\n" +
                "                                                 " + parts + ">;\n";
  };
  std::string nc = std::to_string(p.columns());
  switch (p.epilogue) {
  case Epilogue::Plain: {
    std::string out;
    if (p.f32ScratchOut >= 0)
      out = std::to_string(e.add("float", scratchBinding(p.f32ScratchOut,
                                                        uint64_t(p.tokens * p.nw * 4), "rows"))) +
            ", 1";
    else
      out = e.addResults(cudaType(p.outType), p.outResults, "out");
    columnEpilogue("weft::kernels::Sum", columnsOf(0, p.columns(), out));
    break;
  }
  case Epilogue::Residual: {
    int64_t residual = e.add(std::string("const ") + cudaType(p.residualType),
                             binding(ParamBinding::Kind::RegionInput, p.residualIn, "residual"));
    std::string out = e.addResults(cudaType(p.outType), p.outResults, "out");
    columnEpilogue("weft::kernels::PlusResidual<" + std::to_string(residual) + ", " +
                       cudaType(p.linType) + ">",
                   columnsOf(0, p.columns(), out));
    break;
  }
  case Epilogue::Swiglu: {
    std::string out = e.addResults(cudaType(p.outType), p.outResults, "out");
    columnEpilogue(std::string("weft::kernels::GatedActivation<") + cudaType(p.linType) + ", " +
                       (p.gelu ? "true" : "false") + ">",
                   columnsOf(0, p.columns(), out));
    break;
  }
  case Epilogue::Split: {
    std::vector<std::string> parts;
    for (auto [i, s] : llvm::enumerate(p.segments))
      parts.push_back(columnsOf(
          s.offset, s.size, e.addResults(cudaType(s.type), s.results, "out" + std::to_string(i))));
    e.parts = llvm::join(parts, ",\n                                                 ");
    columnEpilogue("weft::kernels::Sum", e.parts);
    break;
  }
  case Epilogue::Rope: {
    // The split's parts are head groups (weft/rope_kv_write.cuh); the
    // pointers: positions, the cache write's, then each part's results.
    bool cached = llvm::any_of(p.segments, [](const Segment &s) { return s.cache; });
    e.config += "  static constexpr int D = " + std::to_string(p.headDim) + ", HALF = D / 2;\n";
    if (cached)
      e.config += cacheConfig(p.kvHeads, p.cacheType, o);
    if (!p.ropeTables.empty())
      addRopeTables(p.ropeTables, p.headDim / 2, e.preamble, e.config);
    int64_t positions = -1;
    if (p.ropePositionsIn >= 0)
      positions = e.add("const int", binding(ParamBinding::Kind::RegionInput, p.ropePositionsIn,
                                              "positions"));
    std::string cache = "weft::kernels::NoCacheWrite";
    if (cached) {
      int64_t writePositions = positions;
      if (p.writePositionsIn != p.ropePositionsIn)
        writePositions = e.add("const int", binding(ParamBinding::Kind::RegionInput,
                                                     p.writePositionsIn, "write_positions"));
      int64_t slots =
          e.add("const int", binding(ParamBinding::Kind::RegionInput, p.slotsIn, "slots"));
      int64_t tables =
          e.add("const int", binding(ParamBinding::Kind::BlockTables, 0, "block_tables"));
      int64_t k = e.add("Config::cache_t", binding(ParamBinding::Kind::KCache, p.layer, "k_cache"));
      int64_t v = e.add("Config::cache_t", binding(ParamBinding::Kind::VCache, p.layer, "v_cache"));
      cache = "weft::kernels::CacheWrite<" + std::to_string(writePositions) + ", " +
              std::to_string(slots) + ", " + std::to_string(tables) + ", " + std::to_string(k) +
              ", " + std::to_string(v) + ">";
    }
    std::vector<std::string> groups;
    llvm::raw_string_ostream os(e.preamble);
    for (auto [i, s] : llvm::enumerate(p.segments)) {
      std::string name = "Heads" + std::to_string(i);
      std::string res = cudaType(s.resultType);
      int64_t first = int64_t(e.params.size());
      e.addResults(res, s.results, "out" + std::to_string(i));
      os << "struct " << name << " : weft::kernels::HeadGroup {\n"
         << "  static constexpr int HEADS = " << s.size / p.headDim;
      if (s.table >= 0)
        os << ", TABLE = " << s.table;
      if (s.cache)
        os << ", CACHE = " << s.cache;
      if (!s.results.empty())
        os << ", OUT = " << first << ", OUTS = " << s.results.size();
      os << ";\n"
         << "  using part_t = " << cudaType(s.type) << ";\n"
         << "  using res_t = " << res << ";\n"
         << "};\n";
      groups.push_back(name);
    }
    os.flush();
    e.config += "  using Epilogue = weft::kernels::RopeEpilogue<" + std::to_string(positions) +
                ", " + cache + ", " + llvm::join(groups, ", ") + ">;\n";
    break;
  }
  case Epilogue::Logits: {
    std::string out;
    if (p.compact)
      out = std::to_string(e.add("float", p.compact->logits)) + ", 1";
    else if (p.outResults.empty())
      out = std::to_string(e.add("float", scratchBinding(logitsScratch,
                                                         uint64_t(p.tokens * p.nw * 4),
                                                         "logits"))) +
            ", 1";
    else
      out = e.addResults("float", p.outResults, "logits");
    if (p.logitsSoftcap)
      e.config += "  static constexpr float SOFTCAP = " + floatLiteral(*p.logitsSoftcap) +
                  ", INV_SOFTCAP = " + floatLiteral(1.0 / *p.logitsSoftcap) + ";\n";
    columnEpilogue(p.logitsSoftcap ? "weft::kernels::Softcapped" : "weft::kernels::Sum",
                   columnsOf(0, p.columns(), out));
    break;
  }
  }
  return e;
}

//===----------------------------------------------------------------------===//
// Decode projections: one pass over the weights for all T tokens
//===----------------------------------------------------------------------===//

// The projection's input rows: the region's input, or a compact
// projection's compact rows.
ParamBinding xBinding(const Projection &p) {
  return p.compact ? p.compact->x : binding(ParamBinding::Kind::RegionInput, p.xIn, "x");
}
std::vector<ParamBinding> idBindings(const Projection &p);
void addIdsAndInstance(LibraryKernel &k, const Projection &p, llvm::StringRef entry);

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int64_t kStageBytes = 32 * 1024; // activations staged in shared memory

struct GemvPlan {
  bool mma = false; // tensor-core engine (else one FMA per weight and token)
  int64_t vec = 8, cpw = 4, rpc = 1, kw = 1, cpb = 32, splits = 1, ks = 0, kc = 0, gx = 1;
  ElementType stageType = ElementType::BF16;
  bool prenorm = false;     // the rms of every token first, normalized staging
  int64_t tileTokens = 0;   // tokens per tile (grid.z: tokens / tileTokens)
  int64_t mmaK = 16;        // MMA: consecutive k a lane reads of a row per step
};

// Quantized projections with a fused RMSNorm: up to this many tokens, each
// block reads the tokens' whole rows for their rms (PRENORM); more are
// normalized by a kernel of their own first.
constexpr int64_t kMaxPrenormTokens = 4;

// Quantized projections of up to this many tokens run in the GEMV's
// tensor-core engine, in tiles of at most kMaxTileTokens / rows per column
// (it holds a tile's sums in registers, then 4 bytes per token and weight
// row in shared memory); more expand their codes to f16 for cuBLASLt
// (Llama 3.1 8B int4 on an H200: 100 tokens 15.5 ms and 512 tokens 45.9 ms
// per step through tiles, docs/benchmarks.md).
constexpr int64_t kMaxTileTokens = kMaxCodeGemvTokens;
// 8-bit codes tile up to twice as many tokens (so, with the hand-over at
// 32, they run untiled): at 32 tokens a step, Llama 3.1 8B FP8 took 9.04 ms
// with tiles of 32 for gate/up and 9.45 with 16, while AWQ int4 took 7.18
// and 6.35 (docs/benchmarks.md). The bound keeps a tile's sums within
// shared memory should the hand-over move up.
constexpr int64_t kMaxTileTokens8Bit = 2 * kMaxTileTokens;

// The largest divisor of `tokens` that is at most `most`.
int64_t tileTokensFor(int64_t tokens, int64_t most) {
  for (int64_t t = std::min(tokens, most); t > 1; --t)
    if (tokens % t == 0)
      return t;
  return 1;
}

// Tokens above this use the tensor-core engine where it applies: with one
// FMA per weight and token, 8-16 tokens make the GEMV compute-bound.
constexpr int64_t kMaxSimtTokens = 4;

GemvPlan planGemv(const Projection &p, const EmitOptions &o) {
  GemvPlan g;
  g.rpc = p.rowsPerColumn();
  g.tileTokens = p.tokens;
  if (p.quantBits) {
    // Codes expanded to 16-bit pairs of the model's type for the tensor
    // cores, whatever the token count; inputs staged in that type,
    // normalized first (PRENORM) when the norm is fused (emitProjection
    // normalizes many tokens apart).
    g.vec = 8;
    g.mma = true;
    g.stageType = p.weightType;
    g.prenorm = p.normIn >= 0;
    g.tileTokens = tileTokensFor(
        p.tokens, (p.quantBits == 8 ? kMaxTileTokens8Bit : kMaxTileTokens) / g.rpc);
    // 16 bytes of codes per lane where K allows (4 * mmaK k per step), but
    // first a step inside one group, so that its scale multiplies the
    // step's sums rather than each weight (PackedRows::SUM_SCALE).
    g.mmaK = p.quantBits == 4 && p.k % 128 == 0 ? 32 : p.k % 64 == 0 ? 16 : 8;
    for (int64_t me : {int64_t(32), int64_t(16), int64_t(8)})
      if ((me < 32 || p.quantBits == 4) && p.k % (4 * me) == 0 && p.quantGroup % (4 * me) == 0) {
        g.mmaK = me;
        break;
      }
  } else {
    g.vec = vectorWidth(bytesOf(p.weightType), {p.k});
  }
  // The normalized input is x * norm_weight; the 1/rms factor is applied to
  // the dot products at the end. f16 could overflow there, so stage f32.
  if (!p.quantBits) {
    g.stageType = p.normIn >= 0 && p.xType == ElementType::F16 ? ElementType::F32 : p.xType;
    g.mma = o.computeCapability >= 80 && p.tokens > kMaxSimtTokens &&
            p.weightType != ElementType::F32 && g.stageType == p.weightType && p.k % 64 == 0 &&
            g.vec == 8;
  }
  // SIMT: four weight rows in flight per warp. MMA: one 16-row tile per
  // row kind (two for SwiGLU: gate and up).
  g.cpw = g.mma ? 16 : 4 / g.rpc;
  g.cpb = kGemvWarps * g.cpw;
  g.gx = ceilDiv(p.columns(), g.cpb);
  int64_t granule = 32 * g.vec;
  int64_t sms = std::max<int64_t>(1, o.smCount);
  // Too few column blocks for two per SM: groups of KW warps share
  // columns and split K inside the block (SIMT up to 4 warps, 8-bit codes
  // in the MMA engine up to the whole block; 256 of K each at least),
  // which makes more, narrower blocks and needs no second kernel. Argmax
  // keeps whole warps on one token's columns. Measured on an H200, Llama
  // 3.1 8B at batch 1: 8-bit codes 4.04 -> 3.47 ms/token, but 4-bit codes
  // 2.64 -> 2.85 with 8 warps everywhere (docs/benchmarks.md), so 4-bit
  // codes split K across blocks except as follows.
  int64_t maxKw = g.mma ? (p.quantBits == 8 ? kGemvWarps : 1) : 4;
  // 4-bit codes for one token: groups of warps where the projection has
  // one row per column, up to 8 warps with a fused norm (QKV), 4 without
  // (O, down), so QKV needs no reduce kernel and O and down split K in 3
  // blocks instead of 8. Measured on an H200, Llama 3.1 8B int4 at batch 1, three
  // runs each: 2.61-2.65 -> 2.47 ms/token; 8 warps for O and down 2.84-2.89,
  // 2 for every projection 2.65; batch 8 loses with them (3.23 -> 3.34).
  if (g.mma && p.quantBits == 4 && p.tokens == 1 && g.rpc == 1)
    maxKw = p.normIn >= 0 ? kGemvWarps : 4;
  if (p.select != Projection::Select::Argmax)
    while (g.gx < 2 * sms && g.kw < maxKw && p.k >= 2 * g.kw * granule) {
      g.kw *= 2;
      g.cpb = kGemvWarps / g.kw * g.cpw;
      g.gx = ceilDiv(p.columns(), g.cpb);
    }
  // One block per SM keeps enough bytes in flight; with fewer column
  // blocks than SMs, split K up to two blocks per SM, keeping each split at
  // least 512 wide so the stream stays efficient.
  int64_t blocks = g.gx * (p.tokens / g.tileTokens);
  int64_t want = blocks >= sms ? 1 : ceilDiv(2 * sms, blocks);
  int64_t maxSplits = std::max<int64_t>(1, p.k / std::max<int64_t>(512, g.kw * granule));
  g.splits = std::clamp<int64_t>(want, 1, maxSplits);
  g.ks = roundUp(ceilDiv(p.k, g.splits), granule);
  if (g.ks > p.k)
    g.ks = p.k;
  g.splits = ceilDiv(p.k, g.ks);
  int64_t fit = kStageBytes / (g.tileTokens * bytesOf(g.stageType));
  fit = std::max<int64_t>(granule, fit / granule * granule);
  g.kc = std::min(fit, roundUp(g.ks, granule));
  if (g.kc > g.ks)
    g.kc = g.ks;
  return g;
}

// The lines of weft/gemv.cuh's Config for `p` as planned by `g`.
std::string gemvConfig(const Projection &p, const GemvPlan &g, int64_t tiles, bool argmax) {
  bool norm = p.normIn >= 0;
  std::string config;
  llvm::raw_string_ostream os(config);
  os << "  static constexpr int T = " << g.tileTokens << ", TILES = " << tiles << ", K = " << p.k
     << ", NW = " << p.nw << ", NC = " << p.columns()
     << ";  // tokens per tile, tiles, input features, weight rows, outputs\n"
     << "  static constexpr int VEC = " << g.vec << ", THREADS = " << kGemvThreads
     << ", WARPS = THREADS / 32;\n"
     << "  static constexpr int KW = " << g.kw << ", CPW = " << g.cpw << ", RPC = " << g.rpc
     << ", CPB = WARPS / KW * CPW;  // KW warps share CPW columns (splitting K)\n"
     << "  static constexpr int SPLITS = " << g.splits << ", KS = " << g.ks << ", KC = "
     << g.kc << ", XS = " << g.kc + (g.mma ? 16 : 0)
     << ";  // K splits, K per split, K staged at a time, staged row stride\n"
     << "  static constexpr bool NORM = " << (norm ? "true" : "false")
     << ", PRENORM = " << (g.prenorm ? "true" : "false")
     << ", MMA = " << (g.mma ? "true" : "false") << ", ARGMAX = "
     << (argmax ? "true" : "false") << ";\n"
     << "  static constexpr float EPS = " << floatLiteral(norm ? p.eps : 0.0)
     << ", NORM_OFFSET = " << floatLiteral(norm ? p.normOffset : 0.0) << ";\n"
     << "  using x_t = " << cudaType(p.xType) << ";\n"
     << "  using w_t = " << (p.quantBits ? "unsigned" : cudaType(p.weightType)) << ";\n"
     << "  using s_t = " << cudaType(g.stageType) << ";\n"
     << "  using m_t = " << cudaType(p.weightType) << ";\n";
  if (p.quantBits && p.quantFormat == QuantFormat::E4M3)
    os << "  // FP8 E4M3 codes, an f32 scale per row\n"
       << "  using W = weft::kernels::PackedRows<8, " << p.quantGroup << ", " << g.mmaK
       << ", m_t, weft::kernels::Codes::E4M3>;\n";
  else if (p.quantBits)
    os << "  // " << p.quantBits << "-bit codes" << (p.quantTiled ? " in 16-row tiles" : "")
       << ", a (scale, zero) pair per " << p.quantGroup << " inputs of a row\n"
       << "  using W = weft::kernels::PackedRows<" << p.quantBits << ", " << p.quantGroup
       << ", " << g.mmaK << ", m_t"
       << (p.quantTiled ? ", weft::kernels::Codes::Int, true" : "") << ">;\n";
  else
    os << "  using W = weft::kernels::DenseRows<w_t, 16>;\n";
  os << "  using norm_t = " << cudaType(norm ? p.normType : p.xType) << ";\n"
     << "  // Weight row of output column `col` (SwiGLU: j = 0 gate, j = 1 up; RoPE:\n"
     << "  // the pair (i, i + D/2) of a head).\n"
     << "  static __device__ __forceinline__ int row(int col, int j) {\n";
  if (p.epilogue == Epilogue::Swiglu)
    os << "    return (j == 0 ? " << p.gateOffset << " : " << p.upOffset << ") + col;\n";
  else if (p.epilogue == Epilogue::Rope)
    os << "    return col / " << p.headDim / 2 << " * " << p.headDim << " + j * " << p.headDim / 2
       << " + col % " << p.headDim / 2 << ";\n";
  else
    os << "    (void)j;\n    return col;\n";
  os << "  }\n";
  os.flush();
  return config;
}

// The GEMV kernel (and, with split K, the kernel that sums its partials and
// runs the epilogue), weft/gemv.cuh's entry points.
std::vector<EmittedStep> emitGemv(FusionOp region, const Projection &p, const EmitOptions &o,
                                  std::optional<ParamBinding> xFrom = std::nullopt) {
  GemvPlan g = planGemv(p, o);
  bool norm = p.normIn >= 0;
  bool split = g.splits > 1;
  bool argmax = p.select == Projection::Select::Argmax;
  // Released early (measured on an H200, docs/benchmarks.md): split-K
  // partials, so their reduction starts without a launch gap, and 4-bit
  // weights, whose kernels are short enough for the gap to cost more than
  // the next kernel's waiting blocks do; with 4-bit projections, every
  // kernel of a one-token RoPE region (see emitRegion). Every other kernel
  // releases the next as its blocks exit.
  bool ropeOfFourBitToken = releasesEarlyAsFourBitRope(region, o);
  // Scratch ids: 0 partials (split K), 1 argmax candidates, 2 logits when
  // they are not a result.
  int64_t tiles = p.tokens / g.tileTokens;
  uint64_t partialFloats =
      uint64_t(tiles * (g.splits * g.tileTokens * p.nw + (norm ? g.splits * g.tileTokens : 0)));
  EpilogueCode epi = projectionEpilogue(p, /*withBias=*/true, /*logitsScratch=*/2, o);
  std::string base = "weft_" + identifier(region.getKind()) + "_t" + std::to_string(p.tokens) +
                     "_k" + std::to_string(p.k) + "_n" + std::to_string(p.nw);
  ParamBinding candidates = scratchBinding(1, uint64_t(g.gx * p.tokens * 8), "candidates");
  ParamBinding partials = scratchBinding(0, partialFloats * 4, "partials");
  std::string config = gemvConfig(p, g, tiles, argmax);
  std::vector<EmittedStep> steps;

  // --- The GEMV kernel: the epilogue in place, or partial sums.
  {
    LibraryKernel k;
    k.what = region.getKind().str() + ": " + (norm ? "RMSNorm prologue, " : "") +
             (g.mma ? "tensor-core " : "") + "GEMV over all " + std::to_string(p.tokens) +
             " tokens in one pass over the weights" +
             (split ? ", split K (partials summed by a second kernel)" : "") + ".";
    k.header = "weft/gemv.cuh";
    k.config = config;
    k.params.push_back(xFrom ? *xFrom : xBinding(p));
    k.params.push_back(norm ? binding(ParamBinding::Kind::RegionInput, p.normIn, "norm_w")
                            : nullBinding("norm_w"));
    k.params.push_back(binding(ParamBinding::Kind::RegionInput, p.weightIn, "w"));
    ParamBinding scales = binding(ParamBinding::Kind::RegionInput, p.weightIn, "w_scales");
    scales.part = 1;
    k.params.push_back(p.quantBits ? scales : nullBinding("w_scales"));
    if (split) {
      k.params.push_back(partials);
      k.instance = "weft::kernels::gemvSplitKernel<Config>";
    } else {
      k.preamble = epi.preamble;
      k.config += epi.config;
      k.params.push_back(argmax ? candidates : nullBinding("candidates"));
      llvm::append_range(k.params, epi.params);
      k.instance = "weft::kernels::gemvKernel<Config" + epi.pack() + ">";
    }
    k.grid = {int(g.gx), int(g.splits), int(tiles)};
    k.block = {kGemvThreads, 1, 1};
    k.releaseEarly = split || p.quantBits == 4 || ropeOfFourBitToken;
    steps.push_back(
        kernelStep(libraryKernel(region.getKind(), base + (split ? "_splitk" : "_gemv"),
                                 std::move(k))));
  }

  // --- Split K: sum the partials, then the epilogue.
  if (split) {
    LibraryKernel k;
    k.what = region.getKind().str() + ": sums the " + std::to_string(g.splits) +
             " K-split partials of the GEMV" + (norm ? ", applies 1/rms" : "") +
             " and runs the epilogue.";
    k.header = "weft/gemv.cuh";
    k.preamble = epi.preamble;
    k.config = config + epi.config;
    k.params = {partials, argmax ? candidates : nullBinding("candidates")};
    llvm::append_range(k.params, epi.params);
    k.instance = "weft::kernels::gemvReduceKernel<Config" + epi.pack() + ">";
    k.grid = {int(g.gx), 1, int(tiles)};
    k.block = {kGemvThreads, 1, 1};
    k.releaseEarly = ropeOfFourBitToken;
    steps.push_back(kernelStep(libraryKernel(region.getKind(), base + "_reduce", std::move(k))));
  }

  // --- Argmax: the best of the per-block candidates.
  if (argmax) {
    LibraryKernel k;
    k.what = "Argmax over the per-block candidates of a logits GEMV (lowest index among equal "
             "logits).";
    k.header = "weft/gemv.cuh";
    k.config = "  static constexpr int T = " + std::to_string(p.tokens) + ", BLOCKS = " +
               std::to_string(g.gx) + ", THREADS = 256;  // BLOCKS: candidates per token\n";
    k.params = {candidates};
    addIdsAndInstance(k, p, "argmaxCandidatesKernel");
    k.grid = {int(p.tokens), 1, 1};
    k.block = {256, 1, 1};
    steps.push_back(kernelStep(libraryKernel(
        region.getKind(),
        "weft_argmax_candidates_t" + std::to_string(p.tokens) + "_b" + std::to_string(g.gx),
        std::move(k))));
  }
  return steps;
}

// The epilogue of `p` over f32 projection rows [T, NW] (`in`: cuBLASLt's,
// or a quantized GEMV's), for the epilogue only the 16-bit GEMV runs in
// place (RoPE and the cache write): weft/gemv.cuh's split-K reduce with one
// split, a tile per token. `addBias`: the rows lack the bias (cuBLASLt's:
// added here, so each part is rounded to its type once, as the GEMV does).
EmittedStep emitEpilogueRows(FusionOp region, const Projection &p, const EmitOptions &o,
                             ParamBinding in, bool addBias = true) {
  Projection rows = p;
  rows.normIn = -1;    // normalized before the GEMM
  rows.quantBits = 0;  // expanded before the GEMM
  GemvPlan g;
  g.rpc = rows.rowsPerColumn();
  g.tileTokens = 1;
  g.cpw = kGemvThreads / kGemvWarps;
  g.cpb = kGemvThreads;
  g.gx = ceilDiv(rows.columns(), g.cpb);
  g.ks = g.kc = rows.k;
  EpilogueCode epi = projectionEpilogue(rows, addBias, -1, o);
  LibraryKernel k;
  k.what = region.getKind().str() + ": the epilogue over the " + std::to_string(p.tokens) +
           " rows of the projection's f32 output.";
  k.header = "weft/gemv.cuh";
  k.preamble = epi.preamble;
  k.config = gemvConfig(rows, g, p.tokens, false) + epi.config;
  k.params = {in, nullBinding("candidates")};
  llvm::append_range(k.params, epi.params);
  k.instance = "weft::kernels::gemvReduceKernel<Config" + epi.pack() + ">";
  k.grid = {int(g.gx), 1, int(p.tokens)};
  k.block = {kGemvThreads, 1, 1};
  k.releaseEarly = releasesEarlyAsFourBitRope(region, o);
  return kernelStep(libraryKernel(region.getKind(),
                                  "weft_" + identifier(region.getKind()) + "_rows_t" +
                                      std::to_string(p.tokens) + "_n" + std::to_string(p.nw),
                                  std::move(k)));
}

//===----------------------------------------------------------------------===//
// Token selection kernels over f32 logits rows
//===----------------------------------------------------------------------===//

// Where a selection kernel reads the logits: a region result or scratch 2
// (a compact projection's: its compact buffer).
ParamBinding logitsBinding(const Projection &p) {
  if (p.compact)
    return p.compact->logits;
  if (!p.outResults.empty())
    return binding(ParamBinding::Kind::RegionResult, p.outResults.front(), "logits");
  return scratchBinding(2, uint64_t(p.tokens * p.nw * 4), "logits");
}

// Where the selected tokens go: the region's id results "ids, ids_1, ...",
// or a compact projection's one compact buffer.
std::vector<ParamBinding> idBindings(const Projection &p) {
  if (p.compact)
    return {p.compact->ids};
  std::vector<ParamBinding> ids;
  for (size_t c = 0; c < p.idResults.size(); ++c)
    ids.push_back(binding(ParamBinding::Kind::RegionResult, p.idResults[c],
                          c ? "ids_" + std::to_string(c) : "ids"));
  return ids;
}

// Appends the token results to `k`'s parameters and names the template
// `entry` with one `int` pack element each.
void addIdsAndInstance(LibraryKernel &k, const Projection &p, llvm::StringRef entry) {
  std::vector<ParamBinding> ids = idBindings(p);
  k.instance = "weft::kernels::" + entry.str() + "<Config" + moreArgs("int", ids.size()) + ">";
  for (ParamBinding &b : ids)
    k.params.push_back(std::move(b));
}

EmittedStep emitArgmaxRows(FusionOp region, const Projection &p) {
  LibraryKernel k;
  k.what = "Argmax of each logits row, one block per token (lowest index among equal logits).";
  k.header = "weft/sample.cuh";
  k.config = "  static constexpr int V = " + std::to_string(p.nw) + ", THREADS = 256;\n";
  k.params = {logitsBinding(p)};
  addIdsAndInstance(k, p, "argmaxRowsKernel");
  k.grid = {int(p.tokens), 1, 1};
  k.block = {256, 1, 1};
  return kernelStep(libraryKernel(region.getKind(), "weft_argmax_rows_v" + std::to_string(p.nw),
                                  std::move(k)));
}

// The soft cap of logits a library GEMM wrote (weft/softcap.cuh).
EmittedStep emitSoftcapRows(FusionOp region, const Projection &p) {
  LibraryKernel k;
  k.what = "cap * tanh(logit / cap) of each logit, in place.";
  k.header = "weft/softcap.cuh";
  k.config = "  static constexpr int V = " + std::to_string(p.nw) + ", THREADS = 256;\n" +
             "  static constexpr float CAP = " + floatLiteral(*p.logitsSoftcap) +
             ", INV_CAP = " + floatLiteral(1.0 / *p.logitsSoftcap) + ";\n";
  k.instance = "weft::kernels::softcapRowsKernel<Config>";
  k.params = {logitsBinding(p)};
  k.grid = {int(ceilDiv(p.nw, 256)), int(p.tokens), 1};
  k.block = {256, 1, 1};
  return kernelStep(libraryKernel(region.getKind(), "weft_softcap_rows_v" + std::to_string(p.nw),
                                  std::move(k)));
}

// The region's sampling parameters (temperature, top_k, top_p, uniform).
std::vector<ParamBinding> samplingInputs(const Projection &p) {
  return {binding(ParamBinding::Kind::RegionInput, p.temperatureIn, "temperature"),
          binding(ParamBinding::Kind::RegionInput, p.topKIn, "top_k"),
          binding(ParamBinding::Kind::RegionInput, p.topPIn, "top_p"),
          binding(ParamBinding::Kind::RegionInput, p.uniformIn, "uniform")};
}

// weft.sample, one block per token (weft/sample.cuh).
EmittedStep emitSample(FusionOp region, const Projection &p) {
  LibraryKernel k;
  k.what = "weft.sample (temperature, top-k, top-p, uniform) of each logits row, one block per "
           "token.";
  k.header = "weft/sample.cuh";
  k.config = "  static constexpr int V = " + std::to_string(p.nw) + ";\n"
             "  static constexpr int THREADS = 1024, WARPS = THREADS / 32;\n"
             "  static constexpr int CAP = 2048;     // candidates kept in shared memory\n"
             "  static constexpr int REPLICAS = 8;   // histogram copies (fewer same-address "
             "atomics)\n"
             "  static constexpr float CUT = 40.0f;  // candidates: (logit - max) / temperature "
             ">= -CUT\n";
  k.params = {logitsBinding(p)};
  for (ParamBinding &b : p.compact ? std::vector<ParamBinding>{p.compact->temperature,
                                                               p.compact->topK, p.compact->topP,
                                                               p.compact->uniform}
                                   : samplingInputs(p))
    k.params.push_back(std::move(b));
  addIdsAndInstance(k, p, "sampleRowsKernel");
  k.grid = {int(p.tokens), 1, 1};
  k.block = {1024, 1, 1};
  return kernelStep(libraryKernel(region.getKind(), "weft_sample_v" + std::to_string(p.nw),
                                  std::move(k)));
}

//===----------------------------------------------------------------------===//
// Prefill projections: RMSNorm kernel, cuBLASLt GEMM, copy-out kernels
//===----------------------------------------------------------------------===//

EmittedStep emitRmsNormRows(FusionOp region, const Projection &p, ParamBinding out) {
  int64_t vec = vectorWidth(std::max({bytesOf(p.xType), bytesOf(p.normType),
                                      bytesOf(p.normOutType)}),
                            {p.k});
  LibraryKernel k;
  k.what = "RMSNorm of each token row (one block per token), rounded as Hugging Face does.";
  k.header = "weft/rms_norm.cuh";
  k.config = "  static constexpr int K = " + std::to_string(p.k) + ", VEC = " +
             std::to_string(vec) + ", THREADS = 256;\n" +
             "  static constexpr float EPS = " + floatLiteral(p.eps) +
             ", NORM_OFFSET = " + floatLiteral(p.normOffset) + ";\n" +
             "  using x_t = " + cudaType(p.xType) + ";\n" +
             "  using norm_t = " + cudaType(p.normType) + ";\n" +
             "  using y_t = " + cudaType(p.normOutType) + ";\n";
  k.instance = "weft::kernels::rmsNormRowsKernel<Config>";
  k.params = {xBinding(p), binding(ParamBinding::Kind::RegionInput, p.normIn, "norm_w"), out};
  k.grid = {int(p.tokens), 1, 1};
  k.block = {256, 1, 1};
  return kernelStep(libraryKernel(region.getKind(), "weft_rms_norm_k" + std::to_string(p.k),
                                  std::move(k)));
}

// Copies the GEMM output [T, NW] into the split results (prefill).
EmittedStep emitSplitCopy(FusionOp region, const Projection &p, ParamBinding in) {
  llvm::SmallVector<int64_t> extents = {p.nw};
  int64_t widest = bytesOf(p.linType);
  for (const Segment &s : p.segments) {
    extents.push_back(s.size);
    widest = std::max(widest, bytesOf(s.type));
  }
  int64_t vec = vectorWidth(widest, extents);
  int64_t perRow = p.nw / vec;
  int threads = int(std::min<int64_t>(256, roundUp(perRow, 32)));
  // A split's stores need no cache geometry.
  EpilogueCode epi = projectionEpilogue(p, /*withBias=*/false, -1, EmitOptions{});
  LibraryKernel k;
  k.what = "Copies a projection's columns into its " + std::to_string(p.segments.size()) +
           " split results.";
  k.header = "weft/split.cuh";
  k.config = "  static constexpr int NW = " + std::to_string(p.nw) + ", VEC = " +
             std::to_string(vec) + ", THREADS = " + std::to_string(threads) + ";\n" +
             "  using lin_t = " + cudaType(p.linType) + ";\n" +
             "  using Parts = weft::kernels::SplitParts<" + epi.parts + ">;\n";
  k.params = {in};
  llvm::append_range(k.params, epi.params);
  k.instance = "weft::kernels::splitRowsKernel<Config" + epi.pack() + ">";
  k.grid = {int(ceilDiv(perRow, threads)), int(p.tokens), 1};
  k.block = {threads, 1, 1};
  return kernelStep(
      libraryKernel(region.getKind(), "weft_split_n" + std::to_string(p.nw), std::move(k)));
}

// silu(gate) * up from the GEMM output [T, NW] (prefill).
EmittedStep emitSwigluRows(FusionOp region, const Projection &p, ParamBinding in) {
  int64_t vec = vectorWidth(std::max(bytesOf(p.linType), bytesOf(p.outType)),
                            {p.width, p.gateOffset, p.upOffset, p.nw});
  int64_t perRow = p.width / vec;
  int threads = int(std::min<int64_t>(256, roundUp(perRow, 32)));
  LibraryKernel k;
  k.what = std::string(p.gelu ? "gelu_tanh" : "silu") + "(gate) * up over a projection's output.";
  k.header = "weft/swiglu.cuh";
  k.config = "  static constexpr int NW = " + std::to_string(p.nw) + ", I = " +
             std::to_string(p.width) + ", GATE = " + std::to_string(p.gateOffset) +
             ", UP = " + std::to_string(p.upOffset) + ", VEC = " + std::to_string(vec) +
             ", THREADS = " + std::to_string(threads) + ";\n" +
             "  static constexpr bool GELU = " + (p.gelu ? "true" : "false") + ";\n" +
             "  using lin_t = " + cudaType(p.linType) + ";\n" +
             "  using out_t = " + cudaType(p.outType) + ";\n";
  k.params = {in};
  for (size_t c = 0; c < p.outResults.size(); ++c)
    k.params.push_back(binding(ParamBinding::Kind::RegionResult, p.outResults[c],
                               c ? "out_" + std::to_string(c) : "out"));
  k.instance = "weft::kernels::swigluRowsKernel<Config" +
               moreArgs("Config::out_t", p.outResults.size()) + ">";
  k.grid = {int(ceilDiv(perRow, threads)), int(p.tokens), 1};
  k.block = {threads, 1, 1};
  return kernelStep(libraryKernel(region.getKind(), "weft_swiglu_i" + std::to_string(p.width),
                                  std::move(k)));
}

// A quantized projection's codes expanded to its 16-bit matrix in `out`.
EmittedStep emitExpandCodes(FusionOp region, const Projection &p, ParamBinding out) {
  const int threads = 256;
  int64_t words = p.nw * p.k * p.quantBits / 32;
  const bool e4m3 = p.quantFormat == QuantFormat::E4M3;
  LibraryKernel k;
  k.what = "The " + (e4m3 ? std::string("FP8 E4M3") : std::to_string(p.quantBits) + "-bit") +
           " codes of a projection expanded to its " + cudaType(p.weightType) + " matrix.";
  k.header = "weft/mma_weights.cuh";
  k.config = "  static constexpr int NW = " + std::to_string(p.nw) + ", K = " +
             std::to_string(p.k) + ", BITS = " + std::to_string(p.quantBits) + ", GROUP = " +
             std::to_string(p.quantGroup) + ", THREADS = " + std::to_string(threads) + ";\n" +
             "  static constexpr weft::kernels::Codes FORMAT = weft::kernels::Codes::" +
             (e4m3 ? "E4M3" : "Int") + ";\n" +
             "  static constexpr bool TILED = " + (p.quantTiled ? "true" : "false") +
             ";  // codes in 16-row tiles of 128 inputs\n" +
             "  using m_t = " + cudaType(p.weightType) + ";\n";
  k.instance = "weft::kernels::expandCodesKernel<Config>";
  k.params = {binding(ParamBinding::Kind::RegionInput, p.weightIn, "w")};
  ParamBinding scales = binding(ParamBinding::Kind::RegionInput, p.weightIn, "w_scales");
  scales.part = 1;
  k.params.push_back(scales);
  k.params.push_back(out);
  k.grid = {int(ceilDiv(words, threads)), 1, 1};
  k.block = {threads, 1, 1};
  return kernelStep(libraryKernel(region.getKind(),
                                  "weft_expand_codes_n" + std::to_string(p.nw) + "_k" +
                                      std::to_string(p.k),
                                  std::move(k)));
}

// A norm of a projection's output added to the residual (Gemma's
// post-attention and post-feedforward norms): residual + rms_norm(x), one
// block per token, at every token count.
llvm::Expected<std::vector<EmittedStep>> emitNormResidual(FusionOp region, RmsNormOp norm,
                                                          AddOp add) {
  Value residual = add.getLhs() == norm.getResult() ? add.getRhs() : add.getLhs();
  auto shape = matrixShape(norm.getInput());
  auto xt = elementTypeOf(norm.getInput().getType());
  auto nt = elementTypeOf(norm.getWeight().getType());
  auto yt = elementTypeOf(add.getResult().getType());
  if (!shape || !xt || !nt || !yt || elementTypeOf(residual.getType()) != yt ||
      elementTypeOf(norm.getResult().getType()) != yt)
    return regionError(region, "rms_norm + add operands must be static f16/bf16/f32 "
                               "matrices of one result type");
  int64_t xIn = inputIndex(region, norm.getInput()), wIn = inputIndex(region, norm.getWeight()),
          rIn = inputIndex(region, residual);
  auto yielded = yieldedResults(region);
  auto out = yielded.find(add.getResult());
  if (xIn < 0 || wIn < 0 || rIn < 0 || residual == norm.getResult())
    return regionError(region, "rms_norm + add operands must be region inputs");
  if (out == yielded.end() || out->second.size() != 1 || !norm->hasOneUse())
    return regionError(region, "the sum must be the region's one result");
  int64_t k = shape->second, tokens = shape->first;
  int64_t vec = vectorWidth(std::max({bytesOf(*xt), bytesOf(*nt), bytesOf(*yt)}), {k});
  LibraryKernel kernel;
  kernel.what = "residual + RMSNorm of each token row (one block per token).";
  kernel.header = "weft/rms_norm.cuh";
  kernel.config = "  static constexpr int K = " + std::to_string(k) + ", VEC = " +
                  std::to_string(vec) + ", THREADS = 256;\n" +
                  "  static constexpr float EPS = " +
                  floatLiteral(norm.getEpsilon().convertToDouble()) +
                  ", NORM_OFFSET = " + floatLiteral(norm.weightOffsetOrZero()) + ";\n" +
                  "  using x_t = " + cudaType(*xt) + ";\n" +
                  "  using norm_t = " + cudaType(*nt) + ";\n" +
                  "  using y_t = " + cudaType(*yt) + ";\n";
  kernel.instance = "weft::kernels::rmsNormResidualRowsKernel<Config>";
  kernel.params = {binding(ParamBinding::Kind::RegionInput, xIn, "x"),
                   binding(ParamBinding::Kind::RegionInput, wIn, "norm_w"),
                   binding(ParamBinding::Kind::RegionInput, rIn, "residual"),
                   binding(ParamBinding::Kind::RegionResult, out->second.front(), "y")};
  kernel.grid = {int(tokens), 1, 1};
  kernel.block = {256, 1, 1};
  std::vector<EmittedStep> steps;
  steps.push_back(kernelStep(libraryKernel(
      region.getKind(), "weft_rms_norm_residual_k" + std::to_string(k), std::move(kernel))));
  return steps;
}

// Prefill-sized projections: [RMSNorm kernel,] a cuBLASLt GEMM, then the
// epilogue's kernel (split copy, SwiGLU, argmax or sampling). `weights`:
// the B operand when it is not the region's weight input (a quantized
// projection's codes expanded to f16 in a scratch buffer).
llvm::Expected<std::vector<EmittedStep>>
emitPrefillProjection(FusionOp region, const Projection &p, const EmitOptions &o,
                      std::optional<ParamBinding> weights = std::nullopt) {
  std::vector<EmittedStep> steps;
  // Scratch ids: 0 normalized input, 1 GEMM output, 2 logits not yielded.
  ParamBinding a = xBinding(p);
  ElementType aType = p.xType;
  if (p.normIn >= 0) {
    a = scratchBinding(0, uint64_t(p.tokens * p.k * bytesOf(p.normOutType)), "normalized");
    aType = p.normOutType;
    steps.push_back(emitRmsNormRows(region, p, a));
  }
  GemmStep gemm;
  gemm.m = p.tokens;
  gemm.n = p.nw;
  gemm.k = p.k;
  gemm.a = a;
  gemm.aType = aType;
  gemm.b = weights ? *weights : binding(ParamBinding::Kind::RegionInput, p.weightIn, "w");
  gemm.bType = p.weightType;
  gemm.cType = p.isLogits ? ElementType::F32 : p.linType;
  if (p.biasIn >= 0) {
    gemm.bias = binding(ParamBinding::Kind::RegionInput, p.biasIn, "bias");
    gemm.biasType = p.biasType;
  }
  ParamBinding gemmOut =
      scratchBinding(1, uint64_t(p.tokens * p.nw * bytesOf(gemm.cType)), "projection");
  std::vector<EmittedStep> after;
  switch (p.epilogue) {
  case Epilogue::Plain:
  case Epilogue::Residual:
    if (p.outResults.size() != 1)
      return regionError(region, "a prefill projection must be yielded exactly once");
    if (p.outType != p.linType)
      return regionError(region, "prefill GEMM output and result dtypes differ");
    gemm.c = binding(ParamBinding::Kind::RegionResult, p.outResults.front(), "out");
    if (p.epilogue == Epilogue::Residual) {
      if (p.residualType != p.outType)
        return regionError(region, "the residual's dtype differs from the result's");
      gemm.residual = binding(ParamBinding::Kind::RegionInput, p.residualIn, "residual");
    }
    break;
  case Epilogue::Split:
    gemm.c = gemmOut;
    after.push_back(emitSplitCopy(region, p, gemmOut));
    break;
  case Epilogue::Swiglu:
    gemm.c = gemmOut;
    after.push_back(emitSwigluRows(region, p, gemmOut));
    break;
  case Epilogue::Rope:
    // f32 out, bias added by the epilogue: it rounds each part to its type
    // as the GEMV does.
    gemm.c = gemmOut = scratchBinding(1, uint64_t(p.tokens * p.nw * 4), "projection");
    gemm.cType = ElementType::F32;
    gemm.bias.reset();
    after.push_back(emitEpilogueRows(region, p, o, gemmOut));
    break;
  case Epilogue::Logits:
    gemm.c = logitsBinding(p);
    if (p.outResults.size() > 1)
      return regionError(region, "logits yielded more than once");
    if (p.logitsSoftcap)
      after.push_back(emitSoftcapRows(region, p));
    if (p.select == Projection::Select::Argmax)
      after.push_back(emitArgmaxRows(region, p));
    else if (p.select == Projection::Select::Sample)
      after.push_back(emitSample(region, p));
    break;
  }
  EmittedStep g;
  g.gemm = std::move(gemm);
  steps.push_back(std::move(g));
  for (EmittedStep &s : after)
    steps.push_back(std::move(s));
  return steps;
}

llvm::Expected<std::vector<EmittedStep>> emitProjection(FusionOp region, const Projection &p,
                                                        const EmitOptions &o);

// The LM head of a step of more rows than sequences on the rows that end a
// sequence's run only (EmitOptions::sampledRowsLogits,
// weft/sampled_rows.cuh): a kernel gathers those rows (and their sampling
// parameters) into R = maxSequences compact rows, the head and the token
// selection run on them as a projection of R tokens, and a kernel puts the
// logits and tokens back at their rows. Scratch 6-13 (the projection's own
// steps use 0-5).
llvm::Expected<std::vector<EmittedStep>> emitSampledRowsLogits(FusionOp region,
                                                               const Projection &p,
                                                               const EmitOptions &o) {
  const int64_t rows = o.maxSequences, T = p.tokens;
  const bool sample = p.select == Projection::Select::Sample;
  // Typed as what they stand for: the kernels that read them read the
  // region's activations and the step's inputs in other buckets.
  using ST = ParamBinding::ScratchType;
  auto typed = [](ParamBinding b, ST type) {
    b.scratchType = type;
    return b;
  };
  Projection::Compact c;
  ParamBinding rowIndex = typed(scratchBinding(6, uint64_t(rows * 4), "rows"), ST::I32);
  c.x = typed(scratchBinding(7, uint64_t(rows * p.k * bytesOf(p.xType)), "xs"),
              p.xType == ElementType::F16    ? ST::F16
              : p.xType == ElementType::BF16 ? ST::BF16
                                             : ST::F32);
  c.temperature = typed(scratchBinding(8, uint64_t(rows * 4), "temperature_s"), ST::F32);
  c.topK = typed(scratchBinding(9, uint64_t(rows * 4), "top_k_s"), ST::I32);
  c.topP = typed(scratchBinding(10, uint64_t(rows * 4), "top_p_s"), ST::F32);
  c.uniform = typed(scratchBinding(11, uint64_t(rows * 4), "uniform_s"), ST::F32);
  c.logits = typed(scratchBinding(12, uint64_t(rows * p.nw * 4), "logits_s"), ST::F32);
  c.ids = typed(scratchBinding(13, uint64_t(rows * 4), "ids_s"), ST::I32);
  std::string config = "  static constexpr int T = " + std::to_string(T) + ", R = " +
                       std::to_string(rows) + ", H = " + std::to_string(p.k) + ", V = " +
                       std::to_string(p.nw) + ";  // rows, compact rows, hidden, vocabulary\n" +
                       "  static constexpr int MAX_SEQUENCES = " +
                       std::to_string(o.maxSequences) + ", THREADS = 256;\n" +
                       "  static constexpr bool SAMPLE = " + (sample ? "true" : "false") +
                       ";\n" + "  using x_t = " + cudaType(p.xType) + ";\n";
  std::vector<EmittedStep> steps;
  {
    LibraryKernel k;
    k.what = "The rows of the step that end a sequence's run (the sampled ones), their\n"
             "hidden states and sampling parameters into " +
             std::to_string(rows) + " compact rows.";
    k.header = "weft/sampled_rows.cuh";
    k.config = config;
    ParamBinding slots = binding(ParamBinding::Kind::Slots, 0, "slots");
    slots.bytes = uint64_t(T * 4); // the rows the kernel reads
    k.params = {slots, binding(ParamBinding::Kind::RegionInput, p.xIn, "x")};
    if (sample)
      for (ParamBinding &b : samplingInputs(p))
        k.params.push_back(std::move(b));
    k.params.push_back(rowIndex);
    k.params.push_back(c.x);
    if (sample)
      for (const ParamBinding &b : {c.temperature, c.topK, c.topP, c.uniform})
        k.params.push_back(b);
    k.instance = std::string("weft::kernels::") +
                 (sample ? "gatherSampledRowsSamplingKernel" : "gatherSampledRowsKernel") +
                 "<Config>";
    k.grid = {int(rows), 1, 1};
    k.block = {256, 1, 1};
    steps.push_back(kernelStep(libraryKernel(
        region.getKind(),
        "weft_gather_sampled_rows_t" + std::to_string(T) + "_r" + std::to_string(rows),
        std::move(k))));
  }
  Projection q = p;
  q.tokens = rows;
  q.compact = c;
  llvm::Expected<std::vector<EmittedStep>> head = emitProjection(region, q, o);
  if (!head)
    return head.takeError();
  for (EmittedStep &s : *head)
    steps.push_back(std::move(s));
  {
    LibraryKernel k;
    k.what = "The compact rows' logits and tokens back at the rows they came from.";
    k.header = "weft/sampled_rows.cuh";
    k.config = config;
    k.params = {rowIndex, c.logits, c.ids};
    const bool logits = !p.outResults.empty();
    if (logits)
      k.params.push_back(
          binding(ParamBinding::Kind::RegionResult, p.outResults.front(), "logits"));
    for (size_t i = 0; i < p.idResults.size(); ++i)
      k.params.push_back(binding(ParamBinding::Kind::RegionResult, p.idResults[i],
                                 i ? "ids_" + std::to_string(i) : "ids"));
    k.instance = std::string("weft::kernels::") +
                 (logits ? "scatterSampledRowsKernel" : "scatterSampledTokensKernel") +
                 "<Config" + moreArgs("int", p.idResults.size()) + ">";
    k.grid = {int(ceilDiv(p.nw, 256)), int(rows), 1};
    k.block = {256, 1, 1};
    steps.push_back(kernelStep(libraryKernel(
        region.getKind(),
        "weft_scatter_sampled_rows_v" + std::to_string(p.nw) + "_r" + std::to_string(rows),
        std::move(k))));
  }
  return steps;
}

llvm::Expected<std::vector<EmittedStep>> emitProjection(FusionOp region, const Projection &p,
                                                        const EmitOptions &o) {
  if (p.isLogits && o.sampledRowsLogits && !p.compact && p.tokens > o.maxSequences) {
    if (p.outResults.size() > 1)
      return regionError(region, "logits yielded more than once");
    return emitSampledRowsLogits(region, p, o);
  }
  if (p.quantBits) {
    // Quantized weights: the GEMV's tensor-core engine at every token
    // count (cuBLASLt reads 16-bit weights only). Many tokens are
    // normalized once by their own kernel rather than by every block.
    const bool sixteenBit = p.weightType == ElementType::F16 || p.weightType == ElementType::BF16;
    if (!sixteenBit || p.xType != p.weightType ||
        (p.normIn >= 0 && p.normOutType != p.weightType))
      return regionError(region, "quantized weights need f16 or bf16 activations of the "
                                 "weights' own type (f32 models cannot use them)");
    if (p.quantFormat == QuantFormat::E4M3 && o.computeCapability < 89)
      return regionError(region, "FP8 E4M3 weights need sm_89 or newer, and this kernel is "
                                 "built for sm_" + std::to_string(o.computeCapability));
    if (p.k % 32 != 0 || p.quantGroup % 32 != 0)
      return regionError(region, "quantized weights need inputs and groups in multiples of 32");
    // A quantized LM head of up to two tiles' worth of rows (a decode batch
    // of 64, or a sampled-rows head's compact rows, emitSampledRowsLogits):
    // the GEMV reads the head's codes once per tile but needs no 16-bit copy
    // of the head (1.05 GB for Llama 3.1 8B), and at 64 rows its products
    // (67 GFLOP at the code GEMV's mma.sync rate) take about as long as
    // expanding the codes would (estimates: not yet measured). Tiles of at
    // least 16 rows: at most 4 passes.
    const int64_t tileTokens = planGemv(p, o).tileTokens;
    const bool headTiles = p.isLogits && p.tokens <= kMaxHeadTileTokens && tileTokens >= 16;
    if (p.tokens > kMaxTileTokens && !headTiles) {
      // Many tokens: each tile would read and expand the codes again, so
      // expand them once into f16 and let cuBLASLt reuse them across the
      // tokens (scratch 4; the GEMM path uses 0-2).
      ParamBinding expanded = scratchBinding(4, uint64_t(p.nw * p.k * 2), "expanded");
      std::vector<EmittedStep> steps = {emitExpandCodes(region, p, expanded)};
      llvm::Expected<std::vector<EmittedStep>> gemm = emitPrefillProjection(region, p, o, expanded);
      if (!gemm)
        return gemm.takeError();
      for (EmittedStep &s : *gemm)
        steps.push_back(std::move(s));
      return steps;
    }
    // RoPE and the cache write: the GEMV keeps one weight row per column
    // and writes f32 rows (scratch 5) that a second kernel rotates and
    // stores. Pairing rows (i, i + head_dim/2) per column, as the 16-bit
    // GEMV does, halves the 4-bit GEMV's blocks and tiles: measured on an
    // H200, Llama 3.1 8B AWQ took 2.48 ms a token that way against 2.38
    // with RoPE as its own kernel (docs/benchmarks.md).
    auto quantizedGemv = [&](const Projection &q, std::optional<ParamBinding> xFrom) {
      if (q.epilogue != Epilogue::Rope)
        return emitGemv(region, q, o, xFrom);
      Projection rows = q;
      rows.epilogue = Epilogue::Plain;
      rows.f32ScratchOut = 5;
      std::vector<EmittedStep> steps = emitGemv(region, rows, o, xFrom);
      steps.push_back(emitEpilogueRows(
          region, q, o, scratchBinding(5, uint64_t(q.tokens * q.nw * 4), "rows"),
          /*addBias=*/false));
      return steps;
    };
    // A quantized LM head (--lm-head-dtype): the GEMV writes the logits and
    // picks argmax candidates itself when it runs in one tile (candidates
    // are per launch); in tiles, and for sampling, a kernel of its own
    // selects.
    const bool argmaxRows = p.select == Projection::Select::Argmax && p.tokens / tileTokens > 1;
    Projection gp = p;
    if (argmaxRows)
      gp.select = Projection::Select::None;
    std::vector<EmittedStep> steps;
    if (gp.normIn >= 0 && gp.tokens > kMaxPrenormTokens) {
      ParamBinding normalized = scratchBinding(
          3, uint64_t(gp.tokens * gp.k * bytesOf(gp.normOutType)), "normalized");
      steps.push_back(emitRmsNormRows(region, gp, normalized));
      Projection plain = gp;
      plain.normIn = -1;
      plain.xType = gp.normOutType;
      for (EmittedStep &s : quantizedGemv(plain, normalized))
        steps.push_back(std::move(s));
    } else {
      steps = quantizedGemv(gp, std::nullopt);
    }
    if (p.select == Projection::Select::Sample)
      steps.push_back(emitSample(region, p));
    else if (argmaxRows)
      steps.push_back(emitArgmaxRows(region, p));
    return steps;
  }
  if (p.tokens > std::min(o.maxGemvTokens, kMaxGemvTokens))
    return emitPrefillProjection(region, p, o);
  std::vector<EmittedStep> steps = emitGemv(region, p, o);
  if (p.select == Projection::Select::Sample)
    steps.push_back(emitSample(region, p));
  return steps;
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<EmittedStep>> emitEmbedding(FusionOp region, EmbeddingOp emb) {
  auto table = matrixShape(emb.getTable());
  auto out = matrixShape(emb.getResult());
  auto tableType = elementTypeOf(emb.getTable().getType());
  auto outType = elementTypeOf(emb.getResult().getType());
  if (!table || !out)
    return regionError(region, "embedding shapes must be static");
  if (!tableType || !outType)
    return regionError(region, "embedding table and result must be f16, bf16 or f32");
  int64_t tableIn = inputIndex(region, emb.getTable()), idsIn = inputIndex(region, emb.getIds());
  if (tableIn < 0 || idsIn < 0)
    return regionError(region, "embedding operands must be region inputs");
  auto yielded = yieldedResults(region);
  auto it = yielded.find(emb.getResult());
  if (it == yielded.end())
    return regionError(region, "the embedding is not a region result");
  int64_t tokens = out->first, hidden = table->second, vocab = table->first;
  int64_t vec = vectorWidth(std::max(bytesOf(*tableType), bytesOf(*outType)), {hidden});
  int64_t perRow = hidden / vec;
  int threads = int(std::min<int64_t>(256, roundUp(perRow, 32)));
  LibraryKernel k;
  k.what = "Embedding: gathers the table rows of the token ids (ids outside the vocabulary give "
           "zeros).";
  k.header = "weft/embedding.cuh";
  k.config = "  static constexpr int H = " + std::to_string(hidden) + ", V = " +
             std::to_string(vocab) + ", VEC = " + std::to_string(vec) + ", THREADS = " +
             std::to_string(threads) + ";\n";
  // Gemma's normalizer, sqrt(H) as a number of the result's dtype.
  k.config += "  static constexpr float SCALE = " + floatLiteral(emb.roundedScale()) +
              (emb.getScale() ? ";  // rows times sqrt(H) in out_t\n" : ";\n");
  k.config += "  using table_t = " + std::string(cudaType(*tableType)) + ";\n" +
              "  using out_t = " + cudaType(*outType) + ";\n";
  k.params = {binding(ParamBinding::Kind::RegionInput, tableIn, "table"),
              binding(ParamBinding::Kind::RegionInput, idsIn, "ids")};
  for (size_t c = 0; c < it->second.size(); ++c)
    k.params.push_back(binding(ParamBinding::Kind::RegionResult, it->second[c],
                               c ? "out_" + std::to_string(c) : "out"));
  k.instance = "weft::kernels::embeddingKernel<Config" +
               moreArgs("Config::out_t", it->second.size()) + ">";
  k.grid = {int(ceilDiv(perRow, threads)), int(tokens), 1};
  k.block = {threads, 1, 1};
  std::vector<EmittedStep> steps;
  steps.push_back(kernelStep(
      libraryKernel(region.getKind(), "weft_embedding_h" + std::to_string(hidden), std::move(k))));
  return steps;
}

//===----------------------------------------------------------------------===//
// RoPE + KV-cache write
//===----------------------------------------------------------------------===//

// inv_freq of a rope op (RopeOp::inverseFrequencies), errors named by region.
llvm::Expected<std::vector<double>> ropeFrequencies(FusionOp region, RopeOp op) {
  llvm::Expected<std::vector<double>> inv = op.inverseFrequencies();
  if (!inv)
    return regionError(region, llvm::toString(inv.takeError()));
  return inv;
}

// One group of heads the kernel handles: rotated (table >= 0) or copied,
// to results and/or one of the caches.
struct HeadGroup {
  int64_t inputParam = 0; // index into the kernel's input list
  int64_t heads = 0;
  int64_t table = -1;
  int64_t positionsParam = -1; // rope positions
  llvm::SmallVector<int64_t, 1> results;
  int cache = 0; // 0 none, 1 K, 2 V
  ElementType inType, resultType;
  // A head norm before the rotation (HeadRmsNormOp): its weight's input
  // index (-1: none), epsilon and result type.
  int64_t normParam = -1;
  double normEps = 0.0;
  ElementType normType, normWeightType;
};

llvm::Expected<std::vector<EmittedStep>> emitRopeKvWrite(FusionOp region,
                                                         const EmitOptions &o) {
  mlir::Block &body = region.getBody().front();
  auto yielded = yieldedResults(region);
  llvm::SmallVector<RopeOp> ropes;
  llvm::SmallVector<HeadRmsNormOp> norms;
  KvWriteOp write;
  for (Operation &op : body.without_terminator()) {
    if (auto r = llvm::dyn_cast<RopeOp>(op))
      ropes.push_back(r);
    else if (auto n = llvm::dyn_cast<HeadRmsNormOp>(op))
      norms.push_back(n);
    else if (auto w = llvm::dyn_cast<KvWriteOp>(op)) {
      if (write)
        return regionError(region, "more than one kv_write");
      write = w;
    } else {
      return regionError(region, "unsupported op '" + op.getName().getStringRef() +
                                     "' in a rope/kv_write region");
    }
  }
  // Inputs of the kernel (region operands), deduplicated, in first-use order.
  llvm::SmallVector<int64_t> inputs;
  auto useInput = [&](Value v) -> int64_t {
    int64_t i = inputIndex(region, v);
    if (i < 0)
      return -1;
    auto it = llvm::find(inputs, i);
    if (it != inputs.end())
      return it - inputs.begin();
    inputs.push_back(i);
    return int64_t(inputs.size()) - 1;
  };
  int64_t tokens = -1, headDim = -1;
  std::vector<std::vector<double>> tables;
  std::vector<HeadGroup> groups;
  ElementType cacheType = ElementType::BF16;
  int64_t kvHeads = 0;
  if (write) {
    auto cache = write.getCache().getType();
    auto ct = elementTypeOf(cache.getDtype());
    if (!ct)
      return regionError(region, "the KV cache must be f16, bf16 or f32");
    cacheType = *ct;
    kvHeads = cache.getKvHeads();
    headDim = cache.getHeadDim();
  }
  // Each head norm feeds one rope of the region, nothing else.
  for (HeadRmsNormOp n : norms) {
    Value out = n.getResult();
    if (!out.hasOneUse() || !llvm::isa<RopeOp>(*out.getUsers().begin()))
      return regionError(region, "a head_rms_norm must feed one rope of the region and nothing "
                                 "else");
  }
  for (RopeOp r : ropes) {
    auto norm = r.getInput().getDefiningOp<HeadRmsNormOp>();
    Value loaded = norm ? norm.getInput() : r.getInput();
    auto shape = matrixShape(loaded);
    auto it = elementTypeOf(loaded.getType()), rt = elementTypeOf(r.getResult().getType());
    if (!shape || !it || !rt)
      return regionError(region, "rope operands must be static f16/bf16/f32 matrices");
    int64_t dim = r.getHeadDim();
    if (headDim >= 0 && dim != headDim)
      return regionError(region, "rope head_dim differs from the cache's or another rope's");
    if (dim % 2 || shape->second % dim)
      return regionError(region, "rope width is not a multiple of an even head_dim");
    headDim = dim;
    if (tokens >= 0 && shape->first != tokens)
      return regionError(region, "token counts differ");
    tokens = shape->first;
    llvm::Expected<std::vector<double>> inv = ropeFrequencies(region, r);
    if (!inv)
      return inv.takeError();
    int64_t table = llvm::find(tables, *inv) - tables.begin();
    if (table == int64_t(tables.size()))
      tables.push_back(*inv);
    HeadGroup g;
    g.inputParam = useInput(loaded);
    g.positionsParam = useInput(r.getPositions());
    if (g.inputParam < 0 || g.positionsParam < 0)
      return regionError(region, "rope operands must be region inputs");
    if (norm) {
      auto nt = elementTypeOf(norm.getResult().getType());
      auto wt = elementTypeOf(norm.getWeight().getType());
      if (!nt || !wt)
        return regionError(region, "head_rms_norm operands must be f16/bf16/f32");
      if (norm.getHeadDim() != dim)
        return regionError(region, "head_rms_norm head_dim differs from its rope's");
      if (dim & (dim - 1))
        return regionError(region, "head norms need a power-of-two head_dim, got " +
                                       llvm::Twine(dim));
      g.normParam = useInput(norm.getWeight());
      if (g.normParam < 0)
        return regionError(region, "the head_rms_norm weight must be a region input");
      g.normEps = norm.getEpsilon().convertToDouble();
      g.normType = *nt;
      g.normWeightType = *wt;
    }
    g.heads = shape->second / dim;
    g.table = table;
    g.inType = *it;
    g.resultType = *rt;
    auto y = yielded.find(r.getResult());
    if (y != yielded.end())
      g.results = y->second;
    for (Operation *u : r.getResult().getUsers()) {
      if (llvm::isa<YieldOp>(u))
        continue;
      if (u != write.getOperation() || write.getKey() != r.getResult() ||
          write.getValue() == r.getResult())
        return regionError(region, "a rotated tensor may only be yielded or written as keys");
      g.cache = 1;
      if (g.heads != kvHeads)
        return regionError(region, "rotated keys do not match the cache's kv_heads");
    }
    groups.push_back(std::move(g));
  }
  int64_t positionsParam = -1, slotsParam = -1;
  if (write) {
    // Keys not rotated here and the values are copied.
    for (auto [value, cacheKind] : {std::pair(write.getKey(), 1), std::pair(write.getValue(), 2)}) {
      if (value.getDefiningOp<RopeOp>())
        continue;
      auto shape = matrixShape(value);
      auto et = elementTypeOf(value.getType());
      if (!shape || !et || shape->second != kvHeads * headDim)
        return regionError(region, "kv_write operands must be [tokens, kv_heads * head_dim]");
      if (tokens >= 0 && shape->first != tokens)
        return regionError(region, "token counts differ");
      tokens = shape->first;
      HeadGroup g;
      g.inputParam = useInput(value);
      if (g.inputParam < 0)
        return regionError(region, "kv_write operands must be region inputs");
      g.heads = kvHeads;
      g.cache = cacheKind;
      g.inType = g.resultType = *et;
      groups.push_back(std::move(g));
    }
    positionsParam = useInput(write.getPositions());
    slotsParam = useInput(write.getSlots());
    if (positionsParam < 0 || slotsParam < 0)
      return regionError(region, "kv_write positions and slots must be region inputs");
  }
  if (groups.empty() || tokens < 1 || headDim < 2)
    return regionError(region, "nothing to rotate or write");

  int64_t half = headDim / 2;
  int64_t headsPerBlock = half <= 128 ? std::max<int64_t>(1, 128 / half) : 1;
  int64_t threads = headsPerBlock * half;
  if (threads > 1024)
    return regionError(region, "head_dim " + llvm::Twine(headDim) + " is too large");
  int64_t totalHeads = 0;
  for (const HeadGroup &g : groups)
    totalHeads += g.heads;

  // The pointers: inputs in first-use order (the head groups' tensors and
  // norm weights, the int32 positions and slots), the caches and the block
  // table, then each group's results.
  std::vector<ParamBinding> params;
  std::vector<std::string> types;
  for (auto [i, in] : llvm::enumerate(inputs)) {
    std::string type = "int", name;
    for (auto [gi, g] : llvm::enumerate(groups)) {
      if (g.inputParam == int64_t(i) && name.empty()) {
        type = cudaType(g.inType);
        name = g.cache == 1 ? "keys" : g.cache == 2 ? "values" : "x" + std::to_string(gi);
      }
      if (g.normParam == int64_t(i) && name.empty()) {
        type = cudaType(g.normWeightType);
        name = "norm_w" + std::to_string(gi);
      }
    }
    if (name.empty())
      name = int64_t(i) == slotsParam ? "slots" : "positions";
    if (llvm::any_of(params, [&](const ParamBinding &b) { return b.name == name; }))
      name += std::to_string(i);
    params.push_back(binding(ParamBinding::Kind::RegionInput, in, name));
    types.push_back("const " + type);
  }
  std::string config;
  llvm::raw_string_ostream cs(config);
  cs << "  static constexpr int D = " << headDim << ", HALF = D / 2, HEADS_PER_BLOCK = "
     << headsPerBlock << ", HEADS = " << totalHeads << ";\n"
     << "  static constexpr int THREADS = HEADS_PER_BLOCK * HALF;\n";
  if (write) {
    int64_t layer = int64_t(write.getLayer());
    params.push_back(binding(ParamBinding::Kind::KCache, layer, "k_cache"));
    params.push_back(binding(ParamBinding::Kind::VCache, layer, "v_cache"));
    params.push_back(binding(ParamBinding::Kind::BlockTables, 0, "block_tables"));
    types.insert(types.end(), {"Config::cache_t", "Config::cache_t", "const int"});
    cs << cacheConfig(kvHeads, cacheType, o)
       << "  // pointers of the cache write\n"
       << "  static constexpr int WRITE_POSITIONS = " << positionsParam
       << ", SLOTS = " << slotsParam << ", K_CACHE = " << params.size() - 3
       << ", V_CACHE = " << params.size() - 2 << ", BLOCK_TABLES = " << params.size() - 1
       << ";\n";
  }
  cs.flush();
  std::string preamble;
  if (!tables.empty())
    addRopeTables(tables, headDim / 2, preamble, config);
  // One struct per head group.
  std::vector<std::string> groupNames;
  llvm::raw_string_ostream ps(preamble);
  for (auto [gi, g] : llvm::enumerate(groups)) {
    std::string name = "Heads" + std::to_string(gi);
    size_t first = params.size();
    for (auto [c, r] : llvm::enumerate(g.results)) {
      params.push_back(binding(ParamBinding::Kind::RegionResult, r,
                               "out" + std::to_string(gi) + (c ? "_" + std::to_string(c) : "")));
      types.push_back(cudaType(g.resultType));
    }
    ps << "struct " << name << " : weft::kernels::HeadGroup {\n"
       << "  static constexpr int HEADS = " << g.heads << ", IN = " << g.inputParam;
    if (g.table >= 0)
      ps << ", TABLE = " << g.table << ", POSITIONS = " << g.positionsParam;
    if (g.normParam >= 0)
      ps << ", NORM_W = " << g.normParam;
    if (g.cache)
      ps << ", CACHE = " << g.cache;
    if (!g.results.empty())
      ps << ", OUT = " << first << ", OUTS = " << g.results.size();
    ps << ";\n";
    if (g.normParam >= 0)
      ps << "  static constexpr float EPS = " << floatLiteral(g.normEps) << ";\n"
         << "  using norm_t = " << cudaType(g.normType) << ";\n";
    ps << "  using res_t = " << cudaType(g.resultType) << ";\n"
       << "};\n";
    groupNames.push_back(name);
  }
  ps.flush();
  config += "  using Groups = weft::kernels::HeadGroups<" + llvm::join(groupNames, ", ") + ">;\n";

  bool anyNorm = llvm::any_of(groups, [](const HeadGroup &g) { return g.normParam >= 0; });
  LibraryKernel k;
  k.what = "Rotary embedding (rotate half) of each head; rotated keys and the values go to the "
           "paged KV cache.";
  k.header = "weft/rope_kv_write.cuh";
  k.preamble = std::move(preamble);
  k.config = std::move(config);
  k.params = std::move(params);
  std::string pack;
  for (const std::string &t : types)
    pack += ", " + t;
  k.instance = "weft::kernels::ropeKvWriteKernel<Config" + pack + ">";
  k.grid = {int(ceilDiv(totalHeads, headsPerBlock)), int(tokens), 1};
  k.block = {int(threads), 1, 1};
  k.releaseEarly = releasesEarlyAsFourBitRope(region, o);
  std::vector<EmittedStep> steps;
  steps.push_back(kernelStep(libraryKernel(
      region.getKind(),
      std::string(anyNorm ? "weft_norm_rope_kv_write_h" : "weft_rope_kv_write_h") +
          std::to_string(totalHeads) + "_d" + std::to_string(headDim),
      std::move(k))));
  return steps;
}

} // namespace detail

using namespace detail;

namespace {

llvm::Expected<std::vector<EmittedStep>> emitRegionSteps(FusionOp region,
                                                         const EmitOptions &options);

} // namespace

bool hasFourBitProjections(mlir::ModuleOp module) {
  bool found = false;
  module.walk([&](WeightOp w) {
    if (QuantAttr q = quantOf(w.getResult()); q && q.getBits() == 4)
      found = true;
  });
  return found;
}

llvm::Expected<std::vector<EmittedStep>> emitRegion(FusionOp region, const EmitOptions &options) {
  llvm::Expected<std::vector<EmittedStep>> steps = emitRegionSteps(region, options);
  if (!steps)
    return steps.takeError();
  // Every kernel is a library template whose Config says whether it
  // releases its successor early; a 4-bit one-token RoPE region's all do.
  bool early = releasesEarlyAsFourBitRope(region, options);
  for (EmittedStep &s : *steps)
    if (s.kernel) {
      if (s.kernel->instance.empty())
        return regionError(region, "internal error: kernel " + s.kernel->name +
                                       " names no template of the kernel library");
      if (early && !s.kernel->releaseEarly)
        return regionError(region, "internal error: kernel " + s.kernel->name +
                                       " of a 4-bit one-token RoPE region was written "
                                       "without RELEASE_EARLY");
    }
  return steps;
}

namespace {

using RegionSteps = llvm::Expected<std::vector<EmittedStep>>;

template <typename... Ops> bool holds(mlir::Block &body) {
  return llvm::any_of(body.without_terminator(),
                      [](Operation &op) { return llvm::isa<Ops...>(op); });
}

// The region emitters, tried in order: the first whose `matches` accepts a
// region's body generates it. Dispatch is on what the body holds, not on
// the kind string alone; a new kind of region is one entry here.
struct RegionEmitter {
  bool (*matches)(mlir::Block &body);
  RegionSteps (*emit)(FusionOp region, const EmitOptions &options);
};

const RegionEmitter kRegionEmitters[] = {
    // attention (AttentionEmitter.cpp)
    {holds<AttentionOp>,
     [](FusionOp region, const EmitOptions &options) -> RegionSteps {
#ifdef WEFT_HAVE_ATTENTION_EMITTER
       return emitAttentionRegion(region, options);
#else
       (void)options;
       return regionError(region, "attention kernels are not part of this build");
#endif
     }},
    // the embedding, alone
    {holds<EmbeddingOp>,
     [](FusionOp region, const EmitOptions &) -> RegionSteps {
       mlir::Block &body = region.getBody().front();
       if (std::distance(body.without_terminator().begin(), body.without_terminator().end()) != 1)
         return regionError(region, "an embedding region must hold only the embedding");
       return emitEmbedding(region, llvm::cast<EmbeddingOp>(body.front()));
     }},
    // RoPE and the KV-cache write (Qwen3's head norms before them)
    {[](mlir::Block &body) {
       return holds<RopeOp, KvWriteOp>(body) && !holds<LinearOp, LogitsOp>(body);
     },
     emitRopeKvWrite},
    // RMSNorm, then an add of its result (Gemma 2's post-norms)
    {[](mlir::Block &body) {
       auto ops = body.without_terminator();
       if (std::distance(ops.begin(), ops.end()) != 2)
         return false;
       auto norm = llvm::dyn_cast<RmsNormOp>(body.front());
       auto add = llvm::dyn_cast<AddOp>(*std::next(body.begin()));
       return norm && add && llvm::is_contained(add->getOperands(), norm.getResult());
     },
     [](FusionOp region, const EmitOptions &) -> RegionSteps {
       mlir::Block &body = region.getBody().front();
       return emitNormResidual(region, llvm::cast<RmsNormOp>(body.front()),
                               llvm::cast<AddOp>(*std::next(body.begin())));
     }},
    // [rms_norm] -> linear|logits -> epilogue
    {holds<LinearOp, LogitsOp>,
     [](FusionOp region, const EmitOptions &options) -> RegionSteps {
       llvm::Expected<std::optional<Projection>> projection = analyzeProjection(region);
       if (!projection)
         return projection.takeError();
       if (!*projection)
         return regionError(region, "no CUDA kernel for this combination of ops");
       return emitProjection(region, **projection, options);
     }},
};

RegionSteps emitRegionSteps(FusionOp region, const EmitOptions &options) {
  if (region.getBody().empty())
    return regionError(region, "empty region");
  if (options.blockTokens < 1 || options.maxBlocksPerSequence < 1 || options.maxSequences < 1)
    return regionError(region, "block_tokens, max_sequences and max_blocks_per_sequence must "
                               "be positive");
  mlir::Block &body = region.getBody().front();
  for (const RegionEmitter &e : kRegionEmitters)
    if (e.matches(body))
      return e.emit(region, options);
  return regionError(region, "no CUDA kernel for this combination of ops");
}

} // namespace

EmittedKernel emitAccumulateKernel(ElementType type, int64_t count) {
  int64_t blocks = std::min<int64_t>(ceilDiv(count, kAccumulateBlock), 1024);
  LibraryKernel k;
  k.what = "all-reduce without NCCL: dst += src over " + std::to_string(count) + " " +
           elementTypeName(type) + " elements (grid-stride, any grid)";
  k.header = "weft/accumulate.cuh";
  k.config = "  static constexpr long COUNT = " + std::to_string(count) + ";\n" +
             "  static constexpr int THREADS = " + std::to_string(kAccumulateBlock) + ";\n" +
             "  using value_t = " + cudaType(type) + ";\n";
  k.instance = "weft::kernels::accumulateKernel<Config>";
  ParamBinding dst{ParamBinding::Kind::RegionInput, 0};
  dst.name = "dst";
  ParamBinding src{ParamBinding::Kind::RegionInput, 1};
  src.name = "src";
  k.params = {dst, src};
  k.grid = {int(blocks), 1, 1};
  k.block = {int(kAccumulateBlock), 1, 1};
  return libraryKernel("all_reduce",
                       "weft_accumulate_" + std::string(elementTypeName(type)) + "_n" +
                           std::to_string(count),
                       std::move(k));
}

} // namespace weft::cuda

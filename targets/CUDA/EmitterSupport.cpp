// What the kernel emitters share: element types, bindings, the helpers of
// region analysis and libraryKernel, which writes a kernel's source from
// its Config.
#include "targets/CUDA/EmitterSupport.h"

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

std::string packArgs(const std::vector<std::string> &types) {
  std::string out;
  for (const std::string &t : types)
    out += ", " + t;
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


} // namespace detail
} // namespace weft::cuda

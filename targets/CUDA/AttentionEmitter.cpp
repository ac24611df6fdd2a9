// Emits the attention kernels: split flash-decoding (SIMT or tensor cores)
// plus a combine kernel for decode, tensor-core flash attention for prefill.
#include "targets/CUDA/AttentionEmitter.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace weft::cuda {
namespace {

using mlir::BlockArgument;
using mlir::RankedTensorType;
using mlir::Value;

enum class ElemType { F32, F16, BF16 };

// Everything a kernel is specialized for, read from the region.
struct AttentionShape {
  int64_t tokens = 0, heads = 0, kvHeads = 0, headDim = 0, layer = 0;
  int64_t window = 0; // 0: no sliding window
  double scale = 0.0;
  ElemType elem = ElemType::BF16;
  // Operand indices of the weft.fusion.
  int64_t queryInput = 0, positionsInput = 1, slotsInput = 2;
};

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 ("attention region: " + message).str());
}

int64_t elementBytes(ElemType e) { return e == ElemType::F32 ? 4 : 2; }

const char *elemSuffix(ElemType e) {
  switch (e) {
  case ElemType::F32:
    return "f32";
  case ElemType::F16:
    return "f16";
  case ElemType::BF16:
    return "bf16";
  }
  return "?";
}

// Float literal that round-trips through float.
std::string floatLiteral(double v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.9g", v);
  os.flush();
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s + "f";
}

llvm::Expected<AttentionShape> readShape(FusionOp region) {
  mlir::Block &body = region.getBody().front();
  AttentionOp attn;
  for (mlir::Operation &op : body.without_terminator()) {
    auto a = llvm::dyn_cast<AttentionOp>(op);
    if (!a || attn)
      return fail("expected exactly one weft.attention in the body, found '" +
                  op.getName().getStringRef() + "'");
    attn = a;
  }
  if (!attn)
    return fail("no weft.attention in the body");
  auto yield = llvm::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != 1 || yield.getValues()[0] != attn.getResult() ||
      region.getNumResults() != 1)
    return fail("the region must yield exactly the attention result");

  AttentionShape s;
  auto argIndex = [&](Value v, const char *what, int64_t &index) -> llvm::Error {
    auto arg = llvm::dyn_cast<BlockArgument>(v);
    if (!arg || arg.getOwner() != &body)
      return fail(llvm::Twine("the ") + what + " must be a region input");
    index = arg.getArgNumber();
    return llvm::Error::success();
  };
  if (llvm::Error e = argIndex(attn.getQuery(), "query", s.queryInput))
    return std::move(e);
  if (llvm::Error e = argIndex(attn.getPositions(), "positions", s.positionsInput))
    return std::move(e);
  if (llvm::Error e = argIndex(attn.getSlots(), "slots", s.slotsInput))
    return std::move(e);

  s.heads = attn.getNumHeads();
  s.kvHeads = attn.getNumKvHeads();
  s.headDim = attn.getHeadDim();
  s.layer = attn.getLayer();
  s.scale = attn.getScale().convertToDouble();
  if (auto w = attn.getSlidingWindow())
    s.window = int64_t(*w);
  if (s.heads % s.kvHeads != 0)
    return fail("num_heads " + llvm::Twine(s.heads) +
                " is not a multiple of num_kv_heads " + llvm::Twine(s.kvHeads));

  auto qType = llvm::dyn_cast<RankedTensorType>(attn.getQuery().getType());
  if (!qType || qType.getRank() != 2)
    return fail("the query must be a rank-2 tensor");
  if (!qType.isDynamicDim(0)) {
    s.tokens = qType.getDimSize(0);
  } else if (mlir::DictionaryAttr dims = region.getDimsAttr()) {
    if (auto t = dims.getAs<mlir::IntegerAttr>("tokens"))
      s.tokens = t.getInt();
  }
  if (s.tokens <= 0)
    return fail("the token count is not static (run weft-specialize first)");
  if (qType.getDimSize(1) != s.heads * s.headDim)
    return fail("query width " + llvm::Twine(qType.getDimSize(1)) +
                " is not num_heads * head_dim");
  mlir::Type et = qType.getElementType();
  if (et.isF32())
    s.elem = ElemType::F32;
  else if (et.isF16())
    s.elem = ElemType::F16;
  else if (et.isBF16())
    s.elem = ElemType::BF16;
  else
    return fail("unsupported activation dtype (f32, f16 or bf16 expected)");
  KvCacheType cache = attn.getCache().getType();
  if (cache.getDtype() != et)
    return fail("the KV cache dtype differs from the query dtype");
  if (cache.getKvHeads() != s.kvHeads || cache.getHeadDim() != s.headDim)
    return fail("the KV cache shape differs from the attention's");
  if (s.headDim > 512)
    return fail("head_dim " + llvm::Twine(s.headDim) + " is above the supported 512");
  if ((s.headDim * elementBytes(s.elem)) % 4 != 0)
    return fail("head_dim " + llvm::Twine(s.headDim) +
                " is too odd for vector loads (head_dim * element size must be "
                "a multiple of 4 bytes)");

  // The dims the specializer recorded must agree with the op.
  if (mlir::DictionaryAttr dims = region.getDimsAttr()) {
    auto check = [&](const char *name, int64_t expected) -> llvm::Error {
      if (auto a = dims.getAs<mlir::IntegerAttr>(name))
        if (a.getInt() != expected)
          return fail(llvm::Twine("dims.") + name + " = " + llvm::Twine(a.getInt()) +
                      " disagrees with the op (" + llvm::Twine(expected) + ")");
      return llvm::Error::success();
    };
    for (auto [name, value] :
         {std::pair<const char *, int64_t>{"tokens", s.tokens},
          {"num_heads", s.heads},
          {"kv_heads", s.kvHeads},
          {"head_dim", s.headDim},
          {"layer", s.layer}})
      if (llvm::Error e = check(name, value))
        return std::move(e);
  }
  return s;
}

// Parts shared by every source: the element type and its conversions.
void emitElementHelpers(llvm::raw_ostream &os, ElemType elem) {
  // The kernels of a region share one block of constants; not every kernel
  // uses all of them.
  os << "#pragma nv_diag_suppress 177 // declared but never referenced\n";
  switch (elem) {
  case ElemType::BF16:
    os << "#include <cuda_bf16.h>\n\n"
          "typedef __nv_bfloat16 elem_t;\n"
          "static __device__ __forceinline__ elem_t fromFloat(float x) { return "
          "__float2bfloat16_rn(x); }\n"
          "// Both halves of a 32-bit word of two bf16 (low one first): a bf16 is\n"
          "// the top half of an f32, so widening is a shift or a mask.\n"
          "static __device__ __forceinline__ float2 unpackPair(unsigned w) {\n"
          "  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & "
          "0xffff0000u));\n"
          "}\n";
    break;
  case ElemType::F16:
    os << "#include <cuda_fp16.h>\n\n"
          "typedef __half elem_t;\n"
          "static __device__ __forceinline__ elem_t fromFloat(float x) { return "
          "__float2half_rn(x); }\n"
          "static __device__ __forceinline__ float2 unpackPair(unsigned w) {\n"
          "  __half2_raw r;\n"
          "  r.x = (unsigned short)(w & 0xffffu);\n"
          "  r.y = (unsigned short)(w >> 16);\n"
          "  return __half22float2(__half2(r));\n"
          "}\n";
    break;
  case ElemType::F32:
    os << "typedef float elem_t;\n"
          "static __device__ __forceinline__ elem_t fromFloat(float x) { return x; "
          "}\n";
    break;
  }
}

std::string kernelBaseName(const AttentionShape &s, const char *what) {
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "weft_attention_" << what << "_t" << s.tokens << "_h" << s.heads << "_kv"
     << s.kvHeads << "_d" << s.headDim;
  if (s.window)
    os << "_w" << s.window;
  os << "_" << elemSuffix(s.elem);
  // The scale is almost always 1/sqrt(head_dim); another one changes the
  // source, so it must change the name too.
  double standard = 1.0 / std::sqrt(double(s.headDim));
  float f = float(s.scale);
  if (f != float(standard)) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    os << "_sc" << llvm::format_hex_no_prefix(bits, 8);
  }
  os.flush();
  return name;
}

ParamBinding binding(ParamBinding::Kind kind, int64_t index, const char *name) {
  ParamBinding b;
  b.kind = kind;
  b.index = index;
  b.name = name;
  return b;
}

//===----------------------------------------------------------------------===//
// Decode: split flash-decoding and the combine kernel
//===----------------------------------------------------------------------===//

void emitMmaHelpers(llvm::raw_ostream &os, ElemType elem);

constexpr int kDecodeThreads = 128;
constexpr int64_t kMaxSharedBytes = 48 * 1024; // without the opt-in attribute
// Decode grid sizing and kernel choice, tuned on an H200 with 32k-position
// contexts (llama-3.1-8b/70b, llama-2-7b, qwen2.5-7b): about this many
// blocks per SM for one token's splits. More splits make each block's
// cp.async pipeline too short to pay for its fill (8 and 16 per SM were
// slower), fewer leave SMs idle.
constexpr int kDecodeBlocksPerSm = 4;   // SIMT kernel, 128 threads, 48 KiB
constexpr int kDecodeTcBlocksPerSm = 4; // tensor-core kernel, 64 threads
// The SIMT kernel holds the group's query rows and accumulators in
// registers: at most this many floats of each per lane.
constexpr int kDecodeLaneFloats = 64;
constexpr bool kDecodeTensorCores = true;
constexpr int kDecodeTcMinGroup = 4; // tensor cores for larger groups
constexpr int kDecodeTcWarps = 2;
constexpr double kLog2E = 1.4426950408889634;
constexpr const char *kNoScore = "-1.0e30f";

// Model and cache dimensions: every kernel of a region starts with these.
void emitModelConstants(llvm::raw_ostream &os, const AttentionShape &s,
                        const EmitOptions &o, bool chunkKernel) {
  os << "\n// Model and cache dimensions, fixed at compile time.\n"
     << "constexpr int kTokens = " << s.tokens << ";\n"
     << "constexpr int kHeads = " << s.heads << ";\n"
     << "constexpr int kKvHeads = " << s.kvHeads << ";\n"
     << "constexpr int kGroup = " << s.heads / s.kvHeads
     << "; // query heads per KV head\n"
     << "constexpr int kHeadDim = " << s.headDim << ";\n"
     << "constexpr int kWindow = " << s.window << "; // sliding window, 0: none\n"
     << "constexpr float kScale = " << floatLiteral(s.scale) << ";\n"
     << "constexpr float kScaleLog2 = " << floatLiteral(s.scale * kLog2E)
     << "; // scale * log2(e): scores in base 2\n"
     << "constexpr int kBlockTokens = " << o.blockTokens << ";\n"
     << "constexpr int kMaxBlocks = " << o.maxBlocksPerSequence
     << "; // block-table row length\n"
     << "constexpr int kMaxSequences = " << o.maxSequences << ";\n"
     << "constexpr int kMaxContext = kBlockTokens * kMaxBlocks;\n"
     << "constexpr int kQueryWidth = kHeads * kHeadDim;\n"
     << "constexpr int kRowStride = kKvHeads * kHeadDim; // one cached position\n"
     << "constexpr bool kChunkKernel = " << (chunkKernel ? "true" : "false")
     << "; // rows of prefill chunks go to the tensor-core chunk kernel\n";
}

void emitDecodeConstants(llvm::raw_ostream &os, const AttentionShape &s,
                         const AttentionSplitPlan &p, const EmitOptions &o,
                         bool chunkKernel) {
  emitModelConstants(os, s, o, chunkKernel);
  os << "constexpr int kSplits = " << p.splits << ";\n"
     << "constexpr int kGranule = " << p.granule << ";\n"
     << "constexpr int kHeadBlocks = " << p.headBlocks << ";\n"
     << "constexpr int kHeadsPerBlock = " << p.headsPerBlock << ";\n"
     << "constexpr int kHeadsExact = " << (s.heads / s.kvHeads ==
                                             p.headBlocks * p.headsPerBlock)
     << ";\n"
     << "constexpr int kWarps = " << p.warps << ";\n"
     << "constexpr int kThreads = kWarps * 32;\n"
     << "constexpr int kStages = " << p.stages << "; // K/V tiles in flight\n";
  if (p.tensorCores) {
    os << "constexpr int kKeys = " << p.keysPerTile << "; // 16 per warp\n"
       << "constexpr int kPad = kHeadDim + 8; // row pitch: conflict-free ldmatrix\n"
       << "constexpr int kDimChunks = kHeadDim / 8; // 16-byte pieces of a row\n"
       << "constexpr int kStageElems = 2 * kKeys * kPad; // K rows, then V rows\n"
       << "constexpr int kCopies = kKeys * kDimChunks;\n";
  } else {
    int64_t chunks = s.headDim / p.vec;
    os << "constexpr int kVec = " << p.vec << "; // elements per vector load\n"
       << "constexpr int kWords = " << p.vec * elementBytes(s.elem) / 4
       << "; // 32-bit words per vector load\n"
       << "constexpr int kChunks = " << chunks << "; // vectors per head row\n"
       << "constexpr int kLanesPerRow = " << p.lanesPerRow << ";\n"
       << "constexpr int kChunksPerLane = " << p.chunksPerLane << ";\n"
       << "constexpr int kChunksExact = "
       << (p.chunksPerLane * p.lanesPerRow == chunks) << ";\n"
       << "constexpr int kRowsPerWarp = 32 / kLanesPerRow;\n"
       << "constexpr int kUnroll = " << p.unroll << ";\n"
       << "constexpr int kTile = kWarps * kRowsPerWarp * kUnroll; // positions per stage\n"
       << "constexpr int kStageElems = 2 * kTile * kHeadDim; // K rows, then V rows\n"
       << "constexpr int kCopies = kTile * kChunks; // vector copies per stage and tensor\n";
  }
  os << "constexpr int kCopiesPerThread = (kCopies + kThreads - 1) / kThreads;\n"
     << "constexpr int kPartialValues = kTokens * kHeads * kSplits * kHeadDim;\n"
     << "constexpr float kNoScore = " << kNoScore << "; // below any real score\n\n";
}

// Token validity and the range of positions one split covers; the split and
// combine kernels must agree on it exactly.
// Which tokens are real, and which kernel owns each; every kernel of a
// region agrees on it.
const char *kRowHelpers = R"(
// Pads and out-of-range tokens (negative position or slot) get a zero output.
static __device__ __forceinline__ bool tokenValid(int pos, int slot) {
  return pos >= 0 && pos < kMaxContext && slot >= 0 && slot < kMaxSequences;
}
// Which kernel owns a valid row when the region has both: a row whose
// neighbour continues its sequence (same slot) is part of a prefill chunk
// and goes to the tensor-core chunk kernel; a sequence with one token in the
// step (a decode token, or a one-token prompt) goes to flash-decoding, which
// reads its K/V once for the whole query-head group. Both kernels are
// correct for any row; the split only decides which one is fast for it.
// Tokens of a sequence need not be adjacent (each run of equal slots is a
// chunk of its own); invalid rows always belong to flash-decoding (zeros).
static __device__ __forceinline__ bool chunkRow(const int *__restrict__ slots, int t) {
  if (!kChunkKernel)
    return false;
  const int s = slots[t];
  return (t > 0 && slots[t - 1] == s) || (t + 1 < kTokens && slots[t + 1] == s);
}
)";

// The range of positions one split covers; the split and combine kernels
// must agree on it exactly.
const char *kDecodeRangeHelpers = R"(
// A token attends to positions [lo, pos].
static __device__ __forceinline__ int firstVisible(int pos) {
  return kWindow > 0 ? max(0, pos - kWindow + 1) : 0;
}
// Each split takes an equal share of the visible span, rounded up to the
// granule, so short contexts use few splits and long ones all of them.
static __device__ __forceinline__ int splitLength(int span) {
  const int share = (span + kSplits - 1) / kSplits;
  return (share + kGranule - 1) / kGranule * kGranule;
}
)";

std::string loadWordsHelper(int64_t words) {
  std::string s = "static __device__ __forceinline__ void loadWords(const elem_t *p, "
                  "unsigned (&w)[kWords]) {\n";
  if (words == 4)
    s += "  const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));\n"
         "  w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;\n";
  else if (words == 2)
    s += "  const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));\n"
         "  w[0] = v.x; w[1] = v.y;\n";
  else
    s += "  w[0] = __ldg(reinterpret_cast<const unsigned *>(p));\n";
  return s + "}\n";
}

// cp.async of one vector (zero-filled when `fill` is false) and the
// matching shared-memory load.
std::string decodeCopyHelpers(int64_t vecBytes) {
  std::string n = std::to_string(vecBytes);
  std::string s =
      "static __device__ __forceinline__ void copyAsync(elem_t *dst, const elem_t *src, "
      "bool fill) {\n"
      "  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);\n"
      "  asm volatile(\"cp.async." +
      std::string(vecBytes == 16 ? "cg" : "ca") + ".shared.global [%0], [%1], " + n +
      ", %2;\\n\" ::\"r\"(d), \"l\"(src),\n"
      "               \"r\"(fill ? " + n + " : 0) : \"memory\");\n"
      "}\n"
      "static __device__ __forceinline__ void copyAsyncCommit() {\n"
      "  asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");\n"
      "}\n"
      "template <int N> static __device__ __forceinline__ void copyAsyncWait() {\n"
      "  asm volatile(\"cp.async.wait_group %0;\\n\" ::\"n\"(N) : \"memory\");\n"
      "}\n"
      "static __device__ __forceinline__ void loadShared(const elem_t *p, unsigned "
      "(&w)[kWords]) {\n";
  if (vecBytes == 16)
    s += "  const uint4 v = *reinterpret_cast<const uint4 *>(p);\n"
         "  w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;\n";
  else if (vecBytes == 8)
    s += "  const uint2 v = *reinterpret_cast<const uint2 *>(p);\n"
         "  w[0] = v.x; w[1] = v.y;\n";
  else
    s += "  w[0] = *reinterpret_cast<const unsigned *>(p);\n";
  return s + "}\n";
}

std::string unpackHelper(ElemType elem) {
  std::string s = "static __device__ __forceinline__ void unpack(const unsigned "
                  "(&w)[kWords], float (&f)[kVec]) {\n"
                  "#pragma unroll\n"
                  "  for (int i = 0; i < kWords; ++i) {\n";
  if (elem == ElemType::F32)
    s += "    f[i] = __uint_as_float(w[i]);\n";
  else
    s += "    const float2 v = unpackPair(w[i]);\n"
         "    f[2 * i] = v.x;\n"
         "    f[2 * i + 1] = v.y;\n";
  return s + "  }\n}\n";
}

const char *kDecodeKernelBody = R"(
// One block: token blockIdx.x, the query heads [headBase, headBase +
// kHeadsPerBlock) of KV head blockIdx.y / kHeadBlocks, positions of split
// blockIdx.z. K/V rows (one position of the KV head each) arrive in shared
// memory by 16-byte cp.async copies; each row is then read by kLanesPerRow
// lanes with vector loads, once for all the group's query heads. Every row
// of lanes keeps its own online softmax (running max m, sum l and
// accumulator in f32, base-2 scores); rows merge in the warp, warps in
// shared memory.
{
  extern __shared__ float4 smemVec[];
  // After the key loop the stages hold the warps' partial results.
  float *sAcc = reinterpret_cast<float *>(smemVec);        // [kWarps][kHeadsPerBlock][kHeadDim]
  float *sMax = sAcc + kWarps * kHeadsPerBlock * kHeadDim; // [kWarps][kHeadsPerBlock]
  float *sSum = sMax + kWarps * kHeadsPerBlock;            // [kWarps][kHeadsPerBlock]

  const int t = blockIdx.x;
  const int kvh = blockIdx.y / kHeadBlocks;
  const int headBase = kvh * kGroup + (blockIdx.y % kHeadBlocks) * kHeadsPerBlock;
  const int headCount =
      kHeadsExact ? kHeadsPerBlock : min(kHeadsPerBlock, (kvh + 1) * kGroup - headBase);
  const int split = blockIdx.z;
  const int pos = positions[t];
  const int slot = slots[t];
  elem_t *out = reinterpret_cast<elem_t *>(outOrPartials);
  float *partials = reinterpret_cast<float *>(outOrPartials);

  if (!tokenValid(pos, slot)) {
    // With splits the combine kernel writes the zeros.
    if (kSplits == 1)
      for (int i = threadIdx.x; i < headCount * kHeadDim; i += kThreads)
        out[(size_t)t * kQueryWidth + headBase * kHeadDim + i] = fromFloat(0.0f);
    return;
  }
  if (chunkRow(slots, t))
    return; // the chunk kernel writes this row
  const int lo = firstVisible(pos);
  const int length = splitLength(pos + 1 - lo);
  const int begin = lo + split * length;
  const int end = min(pos + 1, begin + length);
  if (begin >= end)
    return; // a short context leaves the later splits empty

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = lane / kLanesPerRow, sub = lane % kLanesPerRow;

  // The query vectors this lane multiplies, pre-scaled to base-2 scores.
  float q[kHeadsPerBlock][kChunksPerLane][kVec];
#pragma unroll
  for (int g = 0; g < kHeadsPerBlock; ++g)
#pragma unroll
    for (int c = 0; c < kChunksPerLane; ++c) {
      const int chunk = sub + c * kLanesPerRow;
      unsigned w[kWords];
      float f[kVec];
      if ((kHeadsExact || g < headCount) && (kChunksExact || chunk < kChunks)) {
        loadWords(query + (size_t)t * kQueryWidth + (headBase + g) * kHeadDim + chunk * kVec, w);
        unpack(w, f);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          f[e] = 0.0f;
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        q[g][c][e] = f[e] * kScaleLog2;
    }

  float m[kHeadsPerBlock], l[kHeadsPerBlock], acc[kHeadsPerBlock][kChunksPerLane][kVec];
#pragma unroll
  for (int g = 0; g < kHeadsPerBlock; ++g) {
    m[g] = kNoScore;
    l[g] = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        acc[g][c][e] = 0.0f;
  }

  // K/V rows stream through shared memory, kStages tiles of kTile positions
  // in flight (cp.async: no registers held), so the loads of later tiles
  // overlap the arithmetic on this one.
  const int *table = block_tables + (size_t)slot * kMaxBlocks;
  const size_t headOffset = (size_t)kvh * kHeadDim;
  elem_t *stages = reinterpret_cast<elem_t *>(smemVec);
  const int tiles = (end - begin + kTile - 1) / kTile;
  auto loadTile = [&](int i) {
    elem_t *sK = stages + (i % kStages) * kStageElems;
    elem_t *sV = sK + kTile * kHeadDim;
    const int first = begin + i * kTile;
#pragma unroll
    for (int n = 0; n < kCopiesPerThread; ++n) {
      const int idx = threadIdx.x + n * kThreads;
      if (kCopies % kThreads != 0 && idx >= kCopies)
        break;
      const int r = idx / kChunks, c = idx % kChunks;
      const int p = first + r;
      const bool ok = p < end; // past the end: zeros, never NaN garbage
      size_t offset = 0;
      if (ok) {
        const int page = __ldg(table + p / kBlockTokens);
        offset = ((size_t)page * kBlockTokens + p % kBlockTokens) * kRowStride + headOffset +
                 c * kVec;
      }
      copyAsync(sK + r * kHeadDim + c * kVec, k_cache + offset, ok);
      copyAsync(sV + r * kHeadDim + c * kVec, v_cache + offset, ok);
    }
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles)
      loadTile(i);
    copyAsyncCommit(); // empty groups keep the count uniform
  }

  // Warp w, row r of it takes tile rows (w * kRowsPerWarp + r) * kUnroll + u.
  // The trip count is block-uniform, so every shuffle sees all 32 lanes.
  for (int i = 0; i < tiles; ++i) {
    copyAsyncWait<kStages - 2>();
    __syncthreads(); // tile i landed; everyone is done with tile i - 1
    if (i + kStages - 1 < tiles)
      loadTile(i + kStages - 1);
    copyAsyncCommit();
    const elem_t *sK = stages + (i % kStages) * kStageElems;
    const elem_t *sV = sK + kTile * kHeadDim;
    const int first = begin + i * kTile;
    // V is read from shared memory only when needed, to save registers.
    const int rowBase = (warp * kRowsPerWarp + row) * kUnroll;
    unsigned kw[kUnroll][kChunksPerLane][kWords];
    bool live[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      live[u] = first + rowBase + u < end;
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = sub + c * kLanesPerRow;
        if (kChunksExact || chunk < kChunks) {
          loadShared(sK + (rowBase + u) * kHeadDim + chunk * kVec, kw[u][c]);
        } else {
#pragma unroll
          for (int w = 0; w < kWords; ++w)
            kw[u][c][w] = 0u;
        }
      }
    }

    // Scores: partial dot products, summed over the row's lanes.
    float s[kUnroll][kHeadsPerBlock];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kChunksPerLane][kVec];
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c)
        unpack(kw[u][c], kf[c]);
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            dot = fmaf(q[g][c][e], kf[c][e], dot);
        s[u][g] = dot;
      }
    }
#pragma unroll
    for (int offset = 1; offset < kLanesPerRow; offset <<= 1)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int g = 0; g < kHeadsPerBlock; ++g)
          s[u][g] += __shfl_xor_sync(0xffffffffu, s[u][g], offset);

    // Online softmax. The running max settles quickly, so the rescale of
    // the accumulators is skipped when no lane of the warp saw it grow.
    float mOld[kHeadsPerBlock];
    bool grew = false;
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
      mOld[g] = m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (live[u])
          m[g] = fmaxf(m[g], s[u][g]);
      grew |= m[g] > mOld[g];
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        const float alpha = exp2f(mOld[g] - m[g]);
        l[g] *= alpha;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc[g][c][e] *= alpha;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[kChunksPerLane][kVec];
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = sub + c * kLanesPerRow;
        unsigned vw[kWords];
        if (kChunksExact || chunk < kChunks) {
          loadShared(sV + (rowBase + u) * kHeadDim + chunk * kVec, vw);
        } else {
#pragma unroll
          for (int w = 0; w < kWords; ++w)
            vw[w] = 0u;
        }
        unpack(vw, vf[c]);
      }
#pragma unroll
      for (int g = 0; g < kHeadsPerBlock; ++g) {
        const float p = live[u] ? exp2f(s[u][g] - m[g]) : 0.0f;
        l[g] += p;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc[g][c][e] = fmaf(p, vf[c][e], acc[g][c][e]);
      }
    }
  }

  copyAsyncWait<0>();
  __syncthreads(); // sAcc below reuses the stages

  // Merge the rows of the warp (lanes kLanesPerRow apart hold the same
  // columns of different rows).
#pragma unroll
  for (int offset = kLanesPerRow; offset < 32; offset <<= 1)
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
      const float mOther = __shfl_xor_sync(0xffffffffu, m[g], offset);
      const float lOther = __shfl_xor_sync(0xffffffffu, l[g], offset);
      const float mNew = fmaxf(m[g], mOther);
      const float a = exp2f(m[g] - mNew), b = exp2f(mOther - mNew);
      m[g] = mNew;
      l[g] = l[g] * a + lOther * b;
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          acc[g][c][e] = acc[g][c][e] * a + __shfl_xor_sync(0xffffffffu, acc[g][c][e], offset) * b;
    }
  if (row == 0) {
#pragma unroll
    for (int g = 0; g < kHeadsPerBlock; ++g) {
#pragma unroll
      for (int c = 0; c < kChunksPerLane; ++c) {
        const int chunk = sub + c * kLanesPerRow;
        if (kChunksExact || chunk < kChunks)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            sAcc[(warp * kHeadsPerBlock + g) * kHeadDim + chunk * kVec + e] = acc[g][c][e];
      }
      if (sub == 0) {
        sMax[warp * kHeadsPerBlock + g] = m[g];
        sSum[warp * kHeadsPerBlock + g] = l[g];
      }
    }
  }
  __syncthreads();

  // Merge the warps; write the output (one split) or this split's partial.
  for (int i = threadIdx.x; i < headCount * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float mAll = kNoScore;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      mAll = fmaxf(mAll, sMax[w * kHeadsPerBlock + g]);
    float a = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(sMax[w * kHeadsPerBlock + g] - mAll);
      a += f * sAcc[(w * kHeadsPerBlock + g) * kHeadDim + d];
      sum += f * sSum[w * kHeadsPerBlock + g];
    }
    const int h = headBase + g;
    if (kSplits == 1) {
      out[(size_t)t * kQueryWidth + h * kHeadDim + d] = fromFloat(sum > 0.0f ? a / sum : 0.0f);
    } else {
      const size_t part = ((size_t)t * kHeads + h) * kSplits + split;
      partials[part * kHeadDim + d] = a;
      if (d == 0) {
        partials[kPartialValues + 2 * part] = mAll;
        partials[kPartialValues + 2 * part + 1] = sum;
      }
    }
  }
}
)";

const char *kDecodeTcKernelBody = R"(
// One block: token blockIdx.x, query heads [headBase, headBase +
// kHeadsPerBlock) of KV head blockIdx.y / kHeadBlocks, positions of split
// blockIdx.z. The heads are the 16 rows of mma.sync m16n8k16 (rows past the
// group are zero), so Q·Kᵀ and P·V run on tensor cores with f32
// accumulation while K/V tiles stream in through cp.async. Warp w takes
// keys [16w, 16w + 16) of every tile and keeps its own online softmax (base
// 2); the warps merge at the end. Thread (lane) holds rows lane/4 and
// lane/4 + 8, columns 2 * (lane % 4) + {0, 1} of every 8-wide tile.
{
  extern __shared__ uint4 smemVec[];
  elem_t *smem = reinterpret_cast<elem_t *>(smemVec);
  const float kNegInf = __int_as_float(0xff800000u);

  const int t = blockIdx.x;
  const int kvh = blockIdx.y / kHeadBlocks;
  const int headBase = kvh * kGroup + (blockIdx.y % kHeadBlocks) * kHeadsPerBlock;
  const int headCount =
      kHeadsExact ? kHeadsPerBlock : min(kHeadsPerBlock, (kvh + 1) * kGroup - headBase);
  const int split = blockIdx.z;
  const int pos = positions[t];
  const int slot = slots[t];
  elem_t *out = reinterpret_cast<elem_t *>(outOrPartials);
  float *partials = reinterpret_cast<float *>(outOrPartials);

  if (!tokenValid(pos, slot)) {
    // With splits the combine kernel writes the zeros.
    if (kSplits == 1)
      for (int i = threadIdx.x; i < headCount * kHeadDim; i += kThreads)
        out[(size_t)t * kQueryWidth + headBase * kHeadDim + i] = fromFloat(0.0f);
    return;
  }
  if (chunkRow(slots, t))
    return; // the chunk kernel writes this row
  const int lo = firstVisible(pos);
  const int length = splitLength(pos + 1 - lo);
  const int begin = lo + split * length;
  const int end = min(pos + 1, begin + length);
  if (begin >= end)
    return; // a short context leaves the later splits empty

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int *table = block_tables + (size_t)slot * kMaxBlocks;
  const size_t headOffset = (size_t)kvh * kHeadDim;
  const int tiles = (end - begin + kKeys - 1) / kKeys;
  auto loadTile = [&](int i) {
    elem_t *sK = smem + (i % kStages) * kStageElems;
    elem_t *sV = sK + kKeys * kPad;
    const int first = begin + i * kKeys;
#pragma unroll
    for (int n = 0; n < kCopiesPerThread; ++n) {
      const int idx = tid + n * kThreads;
      if (kCopies % kThreads != 0 && idx >= kCopies)
        break;
      const int r = idx / kDimChunks, c = idx % kDimChunks;
      const int p = first + r;
      const bool ok = p < end;
      size_t offset = 0;
      if (ok) {
        const int page = __ldg(table + p / kBlockTokens);
        offset = ((size_t)page * kBlockTokens + p % kBlockTokens) * kRowStride + headOffset +
                 c * 8;
      }
      copyAsync16(sK + r * kPad + c * 8, k_cache + offset, ok);
      copyAsync16(sV + r * kPad + c * 8, v_cache + offset, ok);
    }
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles)
      loadTile(i);
    copyAsyncCommit(); // empty groups keep the count uniform
  }

  // Q fragments from global memory: rows are heads headBase + lane/4 (+ 8).
  const int g0 = lane >> 2, g1 = g0 + 8;
  const bool has0 = g0 < headCount, has1 = g1 < headCount;
  unsigned qFrag[kHeadDim / 16][4];
  {
    const elem_t *qRow = query + (size_t)t * kQueryWidth + headBase * kHeadDim + (lane & 3) * 2;
    const unsigned *qa = reinterpret_cast<const unsigned *>(qRow + (has0 ? g0 : 0) * kHeadDim);
    const unsigned *qb = reinterpret_cast<const unsigned *>(qRow + (has1 ? g1 : 0) * kHeadDim);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      qFrag[kk][0] = has0 ? __ldg(qa + kk * 8) : 0u;
      qFrag[kk][1] = has1 ? __ldg(qb + kk * 8) : 0u;
      qFrag[kk][2] = has0 ? __ldg(qa + kk * 8 + 4) : 0u;
      qFrag[kk][3] = has1 ? __ldg(qb + kk * 8 + 4) : 0u;
    }
  }

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float rowMax[2] = {kNegInf, kNegInf};
  float rowSum[2] = {0.0f, 0.0f}; // this thread's columns only until the end

  for (int i = 0; i < tiles; ++i) {
    copyAsyncWait<kStages - 2>();
    __syncthreads(); // tile i landed; everyone is done with tile i - 1
    if (i + kStages - 1 < tiles)
      loadTile(i + kStages - 1);
    copyAsyncCommit();
    const int kb = begin + i * kKeys + warp * 16; // this warp's first key
    if (kb >= end)
      continue; // warp-uniform
    const elem_t *sK = smem + (i % kStages) * kStageElems + warp * 16 * kPad;
    const elem_t *sV = sK + kKeys * kPad;

    float sc[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n)
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      unsigned b[4];
      loadMatrix(b, sK + ((lane & 7) + ((lane >> 4) << 3)) * kPad + kk * 16 + ((lane >> 3) & 1) * 8);
      mma16816(sc[0], qFrag[kk], b[0], b[1]);
      mma16816(sc[1], qFrag[kk], b[2], b[3]);
    }

    // Online softmax; the rescale is skipped while no row's max grows.
    float mOld[2];
    bool grew = false;
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float mx = kNegInf;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = kb + n * 8 + (lane & 3) * 2 + e;
          const float v = key < end ? sc[n][2 * ri + e] * kScaleLog2 : kNegInf;
          sc[n][2 * ri + e] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mOld[ri] = rowMax[ri];
      rowMax[ri] = fmaxf(rowMax[ri], mx);
      grew |= rowMax[ri] > mOld[ri];
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int ri = 0; ri < 2; ++ri) {
        const float alpha = exp2f(mOld[ri] - rowMax[ri]); // -inf - finite: 0
        rowSum[ri] *= alpha;
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n) {
          o[n][2 * ri] *= alpha;
          o[n][2 * ri + 1] *= alpha;
        }
      }
    }
#pragma unroll
    for (int ri = 0; ri < 2; ++ri)
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          sc[n][2 * ri + e] = exp2f(sc[n][2 * ri + e] - rowMax[ri]);

    unsigned a[4];
    a[0] = packPair(sc[0][0], sc[0][1], rowSum[0]);
    a[1] = packPair(sc[0][2], sc[0][3], rowSum[1]);
    a[2] = packPair(sc[1][0], sc[1][1], rowSum[0]);
    a[3] = packPair(sc[1][2], sc[1][3], rowSum[1]);
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      unsigned b[4];
      loadMatrixT(b, sV + ((lane & 7) + ((lane >> 3) & 1) * 8) * kPad + dp * 16 + (lane >> 4) * 8);
      mma16816(o[2 * dp], a, b[0], b[1]);
      mma16816(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
  copyAsyncWait<0>();
  __syncthreads(); // the merge below reuses the stages

  // Merge the warps: sO[warp][row][d], sMax/sSum[warp][row].
  float *sO = reinterpret_cast<float *>(smemVec);
  float *sMax = sO + kWarps * 16 * kHeadDim;
  float *sSum = sMax + kWarps * 16;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    float sum = rowSum[ri];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = g0 + 8 * ri;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      const int d = n * 8 + (lane & 3) * 2;
      sO[(warp * 16 + row) * kHeadDim + d] = o[n][2 * ri];
      sO[(warp * 16 + row) * kHeadDim + d + 1] = o[n][2 * ri + 1];
    }
    if ((lane & 3) == 0) {
      sMax[warp * 16 + row] = rowMax[ri];
      sSum[warp * 16 + row] = sum;
    }
  }
  __syncthreads();
  for (int i = tid; i < headCount * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim, d = i % kHeadDim;
    float mAll = kNoScore;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      mAll = fmaxf(mAll, sMax[w * 16 + g]);
    float a = 0.0f, sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = exp2f(sMax[w * 16 + g] - mAll); // a warp with no keys: 0
      a += f * sO[(w * 16 + g) * kHeadDim + d];
      sum += f * sSum[w * 16 + g];
    }
    const int h = headBase + g;
    if (kSplits == 1) {
      out[(size_t)t * kQueryWidth + h * kHeadDim + d] = fromFloat(sum > 0.0f ? a / sum : 0.0f);
    } else {
      const size_t part = ((size_t)t * kHeads + h) * kSplits + split;
      partials[part * kHeadDim + d] = a;
      if (d == 0) {
        partials[kPartialValues + 2 * part] = mAll;
        partials[kPartialValues + 2 * part + 1] = sum;
      }
    }
  }
}
)";

const char *kCombineKernelBody = R"(
// One block per (token, query head): weighs the splits' partial results by
// exp2(max_s - max) and normalizes by the weighted sum.
{
  extern __shared__ float4 smemVec[];
  float *sWeight = reinterpret_cast<float *>(smemVec); // [kSplits], then 1/sum
  const int t = blockIdx.x, h = blockIdx.y;
  const int pos = positions[t];
  elem_t *o = out + (size_t)t * kQueryWidth + h * kHeadDim;
  if (!tokenValid(pos, slots[t])) {
    for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x)
      o[d] = fromFloat(0.0f);
    return;
  }
  if (chunkRow(slots, t))
    return; // the chunk kernel writes this row
  const int lo = firstVisible(pos);
  const int span = pos + 1 - lo;
  const int length = splitLength(span);
  const int used = (span + length - 1) / length; // splits that did work
  const size_t first = ((size_t)t * kHeads + h) * kSplits;
  const float *stats = partials + kPartialValues + 2 * first;
  if (threadIdx.x < 32) {
    float mAll = kNoScore;
    for (int s = threadIdx.x; s < used; s += 32)
      mAll = fmaxf(mAll, stats[2 * s]);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      mAll = fmaxf(mAll, __shfl_xor_sync(0xffffffffu, mAll, offset));
    float sum = 0.0f;
    for (int s = threadIdx.x; s < used; s += 32) {
      const float w = exp2f(stats[2 * s] - mAll);
      sWeight[s] = w;
      sum += w * stats[2 * s + 1];
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (threadIdx.x == 0)
      sWeight[kSplits] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
  __syncthreads();
  const float inv = sWeight[kSplits];
  for (int d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
    float a = 0.0f;
    for (int s = 0; s < used; ++s)
      a = fmaf(sWeight[s], partials[(first + s) * kHeadDim + d], a);
    o[d] = fromFloat(a * inv);
  }
}
)";

std::vector<EmittedStep> emitDecode(const AttentionShape &s, const EmitOptions &o,
                                    int64_t maxSpan, bool chunkKernel) {
  AttentionSplitPlan p =
      planAttentionSplits(s.tokens, s.heads, s.kvHeads, s.headDim,
                          elementBytes(s.elem), maxSpan, o.smCount);
  std::string base = kernelBaseName(s, "decode") + "_s" + std::to_string(p.splits);
  int64_t stageBytes, mergeBytes;
  if (p.tensorCores) {
    stageBytes = 2 * p.keysPerTile * (s.headDim + 8) * elementBytes(s.elem);
    mergeBytes = p.warps * 16 * (s.headDim + 2) * int64_t(sizeof(float));
  } else {
    stageBytes = 2 * p.warps * (32 / p.lanesPerRow) * p.unroll * s.headDim *
                 elementBytes(s.elem);
    mergeBytes = p.warps * p.headsPerBlock * (s.headDim + 2) * int64_t(sizeof(float));
  }

  std::string common;
  {
    llvm::raw_string_ostream os(common);
    emitElementHelpers(os, s.elem);
    emitDecodeConstants(os, s, p, o, chunkKernel);
    os << kRowHelpers << kDecodeRangeHelpers;
    os.flush();
  }

  EmittedKernel split;
  split.name = base + (p.splits > 1 ? "_split" : "");
  split.regionKind = "attention";
  {
    llvm::raw_string_ostream os(split.source);
    os << "// Weft attention, decode: flash-decoding over the paged KV cache"
       << (p.tensorCores ? " on tensor cores" : "")
       << (p.splits > 1 ? " (split pass)" : "") << ".\n"
       << common << "\n";
    if (p.tensorCores)
      emitMmaHelpers(os, s.elem);
    else
      os << loadWordsHelper(p.vec * elementBytes(s.elem) / 4)
         << decodeCopyHelpers(p.vec * elementBytes(s.elem)) << unpackHelper(s.elem);
    os << "\nextern \"C\" __global__ void __launch_bounds__(kThreads) " << split.name
       << "(\n    const elem_t *__restrict__ query, const int *__restrict__ positions,\n"
          "    const int *__restrict__ slots, const elem_t *__restrict__ k_cache,\n"
          "    const elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,\n"
          "    void *__restrict__ outOrPartials)"
       << (p.tensorCores ? kDecodeTcKernelBody : kDecodeKernelBody);
    os.flush();
  }
  split.grid = {int(s.tokens), int(s.kvHeads * p.headBlocks), int(p.splits)};
  split.block = {int(p.warps * 32), 1, 1};
  split.sharedBytes = int(std::max(p.stages * stageBytes, mergeBytes));
  split.params = {
      binding(ParamBinding::Kind::RegionInput, s.queryInput, "query"),
      binding(ParamBinding::Kind::RegionInput, s.positionsInput, "positions"),
      binding(ParamBinding::Kind::RegionInput, s.slotsInput, "slots"),
      binding(ParamBinding::Kind::KCache, s.layer, "k_cache"),
      binding(ParamBinding::Kind::VCache, s.layer, "v_cache"),
      binding(ParamBinding::Kind::BlockTables, 0, "block_tables"),
  };
  uint64_t partialBytes =
      uint64_t(s.tokens * s.heads * p.splits) * uint64_t(s.headDim + 2) * 4u;
  ParamBinding scratch = binding(ParamBinding::Kind::Scratch, 0, "partials");
  scratch.bytes = partialBytes;
  if (p.splits == 1)
    split.params.push_back(binding(ParamBinding::Kind::RegionResult, 0, "out"));
  else
    split.params.push_back(scratch);

  std::vector<EmittedStep> steps(1);
  steps[0].kernel = std::move(split);
  if (p.splits == 1)
    return steps;

  EmittedKernel combine;
  combine.name = base + "_combine";
  combine.regionKind = "attention";
  {
    llvm::raw_string_ostream os(combine.source);
    os << "// Weft attention, decode: combines the splits' partial results.\n"
       << common << "\nextern \"C\" __global__ void " << combine.name
       << "(\n    const int *__restrict__ positions, const int *__restrict__ slots,\n"
          "    const float *__restrict__ partials, elem_t *__restrict__ out)"
       << kCombineKernelBody;
    os.flush();
  }
  int threads = int(std::clamp<int64_t>((s.headDim + 31) / 32 * 32, 32, 256));
  combine.grid = {int(s.tokens), int(s.heads), 1};
  combine.block = {threads, 1, 1};
  combine.sharedBytes = int((p.splits + 1) * sizeof(float));
  combine.params = {
      binding(ParamBinding::Kind::RegionInput, s.positionsInput, "positions"),
      binding(ParamBinding::Kind::RegionInput, s.slotsInput, "slots"),
      scratch,
      binding(ParamBinding::Kind::RegionResult, 0, "out"),
  };
  steps.emplace_back();
  steps.back().kernel = std::move(combine);
  return steps;
}

//===----------------------------------------------------------------------===//
// Prefill: tensor-core flash attention
//===----------------------------------------------------------------------===//

// Four warps of 16 query rows; eight (128 rows) measured no faster on H200.
constexpr int kPrefillWarps = 4;
constexpr int kPrefillRows = 16 * kPrefillWarps;
constexpr int kPrefillThreads = 32 * kPrefillWarps;

// Keys per tile: as many as two double-buffered K/V stages allow in 48 KiB.
int64_t prefillKeyTile(int64_t headDim) { return headDim <= 64 ? 64 : 32; }

int64_t prefillSharedBytes(int64_t headDim) {
  int64_t pad = headDim + 8;
  int64_t stage = 2 * prefillKeyTile(headDim) * pad * 2; // K and V, 16-bit
  return 2 * stage + 2 * kPrefillWarps * 4              // + row bounds
         + 2 * kPrefillRows * 4;                          // + slots, owned positions
}

bool prefillTakesTensorCores(const AttentionShape &s, const EmitOptions &o) {
  return s.elem != ElemType::F32 && s.headDim % 16 == 0 && s.headDim <= 128 &&
         o.computeCapability >= 80;
}

const char *kMmaHelpers = R"(
// cp.async with zero fill: keys outside the tile's range read as zeros, so a
// masked probability (0) never meets a NaN from stale shared memory.
static __device__ __forceinline__ void copyAsync16(void *dst, const void *src, bool fill) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(fill ? 16 : 0)
               : "memory");
}
static __device__ __forceinline__ void copyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void copyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void loadMatrix(unsigned (&r)[4], const elem_t *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
static __device__ __forceinline__ void loadMatrixT(unsigned (&r)[4], const elem_t *p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
// c += a (16x16, row) * b (16x8, col), f32 accumulation.
static __device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4],
                                                unsigned b0, unsigned b1) {
  asm volatile(MMA_INSTRUCTION
               " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
)";

const char *kPrefillKernelBody = R"(
// Block: query rows [q0, q0 + kRows) of head blockIdx.y; warp w owns rows
// q0 + 16w .. q0 + 16w + 15. Thread (lane) holds, in the mma layout, rows
// lane/4 and lane/4 + 8 of its warp's 16 and columns 2 * (lane % 4) + {0, 1}
// of every 8-wide tile. Keys stream through shared memory in tiles of kKeys
// (cp.async, two stages); S = Q Kᵀ and O += P V run on tensor cores with f32
// accumulation; the softmax is online, in base 2, per row.
//
// A step may hold chunks of several sequences (and decode tokens, which
// flash-decoding owns): the block takes each run of equal slots in its rows
// (a segment) in turn, with that sequence's block table, and only the rows
// it owns (chunkRow) take part; a tile without such rows exits at once.
{
  extern __shared__ uint4 smemVec[];
  elem_t *smem = reinterpret_cast<elem_t *>(smemVec);
  const float kNegInf = __int_as_float(0xff800000u);
  int *sBounds = reinterpret_cast<int *>(smem + 2 * kStageElems); // [2][kWarps]
  int *sSlot = sBounds + 2 * kWarps;                               // [kRows]
  int *sOwned = sSlot + kRows; // [kRows] position of an owned row, -1 otherwise

  // Later tiles see more keys: start them first.
  const int tile = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, kvh = h / kGroup;
  const int q0 = tile * kRows;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  bool anyOwned = false;
  if (tid < kRows) {
    const int r = q0 + tid;
    int slot = -1, owned = -1;
    if (r < kTokens) {
      slot = slots[r];
      const int p = positions[r];
      if (tokenValid(p, slot) && chunkRow(slots, r))
        owned = p;
    }
    sSlot[tid] = slot;
    sOwned[tid] = owned;
    anyOwned = owned >= 0;
  }
  if (!__syncthreads_or(anyOwned))
    return; // decode tokens and pads only: flash-decoding writes them

  // Q fragments straight from global memory (read once): rows r0 and r1,
  // columns 2 * (lane % 4) + {0, 1} and + 8 of every 16-wide step. Pad rows
  // read row 0 and are never stored.
  const int r0 = q0 + warp * 16 + (lane >> 2), r1 = r0 + 8;
  unsigned qFrag[kHeadDim / 16][4];
  {
    const unsigned *qa = reinterpret_cast<const unsigned *>(
        query + (size_t)(r0 < kTokens ? r0 : 0) * kQueryWidth + h * kHeadDim + (lane & 3) * 2);
    const unsigned *qb = reinterpret_cast<const unsigned *>(
        query + (size_t)(r1 < kTokens ? r1 : 0) * kQueryWidth + h * kHeadDim + (lane & 3) * 2);
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      qFrag[kk][0] = __ldg(qa + kk * 8);
      qFrag[kk][1] = __ldg(qb + kk * 8);
      qFrag[kk][2] = __ldg(qa + kk * 8 + 4);
      qFrag[kk][3] = __ldg(qb + kk * 8 + 4);
    }
  }

  for (int segBegin = 0; segBegin < kRows;) {
    // The segment: rows [segBegin, segEnd) of the tile share one slot.
    const int slot = sSlot[segBegin];
    int segEnd = segBegin + 1;
    bool segOwned = sOwned[segBegin] >= 0;
    while (segEnd < kRows && sSlot[segEnd] == slot) {
      segOwned |= sOwned[segEnd] >= 0;
      ++segEnd;
    }
    const int lo = segBegin, hi = segEnd;
    segBegin = segEnd;
    if (!segOwned)
      continue; // block-uniform: every thread read the same shared arrays

    // This thread's two rows and their positions (-1: not in the segment,
    // not owned, pad or invalid).
    const int i0 = r0 - q0, i1 = r1 - q0;
    const int pos0 = i0 >= lo && i0 < hi ? sOwned[i0] : -1;
    const int pos1 = i1 >= lo && i1 < hi ? sOwned[i1] : -1;
    // Bounds of the warp's rows, then of the block's.
    int wMax = max(pos0, pos1);
    int wMin = min(pos0 < 0 ? 0x7fffffff : pos0, pos1 < 0 ? 0x7fffffff : pos1);
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      wMax = max(wMax, __shfl_xor_sync(0xffffffffu, wMax, offset));
      wMin = min(wMin, __shfl_xor_sync(0xffffffffu, wMin, offset));
    }
    const bool wAnyInvalid = __any_sync(0xffffffffu, pos0 < 0 || pos1 < 0);
    __syncthreads(); // the previous segment is done with sBounds and the stages
    if (lane == 0) {
      sBounds[warp] = wMax;
      sBounds[kWarps + warp] = wMin;
    }
    __syncthreads();
    int bMax = -1, bMin = 0x7fffffff;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      bMax = max(bMax, sBounds[w]);
      bMin = min(bMin, sBounds[kWarps + w]);
    }
    // Keys any row of the block may see: [kLo, kHi).
    const int kLo = kWindow > 0 ? max(0, bMin - kWindow + 1) : 0;
    const int kHi = bMax + 1;
    const int firstKey = kLo / kKeys * kKeys;
    const int tiles = (kHi - firstKey + kKeys - 1) / kKeys;
    const int *table = block_tables + (size_t)slot * kMaxBlocks;

    // Stage s holds K at s * kStageElems and V after it.
    auto loadKeys = [&](int j, int stage) {
      elem_t *sK = smem + stage * kStageElems;
      elem_t *sV = sK + kKeys * kPad;
      const int kb = firstKey + j * kKeys;
#pragma unroll
      for (int n = 0; n < kCopiesPerThread; ++n) {
        const int i = tid + n * kThreads;
        if (kCopies % kThreads != 0 && i >= kCopies)
          break;
        const int r = i / kDimChunks, c = i % kDimChunks;
        const int p = kb + r;
        const bool ok = p >= kLo && p < kHi;
        size_t offset = 0;
        if (ok) {
          const int page = __ldg(table + p / kBlockTokens);
          offset = ((size_t)page * kBlockTokens + p % kBlockTokens) * kRowStride +
                   (size_t)kvh * kHeadDim + c * 8;
        }
        copyAsync16(sK + r * kPad + c * 8, k_cache + offset, ok);
        copyAsync16(sV + r * kPad + c * 8, v_cache + offset, ok);
      }
    };

    loadKeys(0, 0);
    copyAsyncCommit();

    float o[kHeadDim / 8][4];
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float rowMax[2] = {kNegInf, kNegInf};
    float rowSum[2] = {0.0f, 0.0f}; // this thread's columns only until the end

    for (int j = 0; j < tiles; ++j) {
      if (j + 1 < tiles) {
        loadKeys(j + 1, (j + 1) & 1);
        copyAsyncCommit();
        copyAsyncWait<1>();
      } else {
        copyAsyncWait<0>();
      }
      __syncthreads();
      const int kb = firstKey + j * kKeys;
      const elem_t *sK = smem + (j & 1) * kStageElems;
      const elem_t *sV = sK + kKeys * kPad;
      // Skip the tile when no key of it is visible to any row of the warp.
      const bool skip = kb > wMax || (kWindow > 0 && kb + kKeys - 1 < wMin - kWindow + 1);
      if (!skip) {
        float sc[kKeys / 8][4];
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
          sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kHeadDim / 16; ++kk)
#pragma unroll
          for (int np = 0; np < kKeys / 16; ++np) {
            unsigned b[4];
            loadMatrix(b, sK + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * kPad + kk * 16 +
                              ((lane >> 3) & 1) * 8);
            mma16816(sc[2 * np], qFrag[kk], b[0], b[1]);
            mma16816(sc[2 * np + 1], qFrag[kk], b[2], b[3]);
          }

        // Masks are needed only where the tile crosses a row's causal or
        // window edge (or the warp has pad rows).
        const bool full = !wAnyInvalid && kb + kKeys - 1 <= wMin &&
                          (kWindow == 0 || wMax - kb < kWindow);
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          const int pr = ri ? pos1 : pos0;
          float mx = kNegInf;
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float v = sc[n][2 * ri + e] * kScaleLog2;
              if (!full) {
                const int key = kb + n * 8 + (lane & 3) * 2 + e;
                const bool visible = pr >= 0 && key <= pr && (kWindow == 0 || pr - key < kWindow);
                v = visible ? v : kNegInf;
              }
              sc[n][2 * ri + e] = v;
              mx = fmaxf(mx, v);
            }
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float mNew = fmaxf(rowMax[ri], mx);
          // A row with nothing visible yet keeps exp2(-inf - 0) = 0 everywhere.
          const float ref = mNew == kNegInf ? 0.0f : mNew;
          const float alpha = exp2f(rowMax[ri] - ref);
          rowMax[ri] = mNew;
          rowSum[ri] *= alpha;
#pragma unroll
          for (int n = 0; n < kHeadDim / 8; ++n) {
            o[n][2 * ri] *= alpha;
            o[n][2 * ri + 1] *= alpha;
          }
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              sc[n][2 * ri + e] = exp2f(sc[n][2 * ri + e] - ref);
        }

        // P (rounded to 16 bits, and summed as rounded so the weights the mma
        // uses are exactly the ones normalized by) times V.
#pragma unroll
        for (int kk = 0; kk < kKeys / 16; ++kk) {
          unsigned a[4];
          a[0] = packPair(sc[2 * kk][0], sc[2 * kk][1], rowSum[0]);
          a[1] = packPair(sc[2 * kk][2], sc[2 * kk][3], rowSum[1]);
          a[2] = packPair(sc[2 * kk + 1][0], sc[2 * kk + 1][1], rowSum[0]);
          a[3] = packPair(sc[2 * kk + 1][2], sc[2 * kk + 1][3], rowSum[1]);
#pragma unroll
          for (int dp = 0; dp < kHeadDim / 16; ++dp) {
            unsigned b[4];
            loadMatrixT(b, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kPad + dp * 16 +
                               (lane >> 4) * 8);
            mma16816(o[2 * dp], a, b[0], b[1]);
            mma16816(o[2 * dp + 1], a, b[2], b[3]);
          }
        }
      }
      __syncthreads(); // the stage is refilled next iteration
    }

#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float sum = rowSum[ri];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int r = ri ? r1 : r0;
      if ((ri ? pos1 : pos0) >= 0) {
        elem_t *dst = out + (size_t)r * kQueryWidth + h * kHeadDim + (lane & 3) * 2;
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n)
          storePair(dst + n * 8, o[n][2 * ri] * inv, o[n][2 * ri + 1] * inv);
      }
    }
  } // segments
}
)";

void emitMmaHelpers(llvm::raw_ostream &os, ElemType elem) {
  bool bf16 = elem == ElemType::BF16;
  os << "#define MMA_INSTRUCTION \"mma.sync.aligned.m16n8k16.row.col.f32."
     << (bf16 ? "bf16.bf16" : "f16.f16") << ".f32\"\n\n";
  // Pairs of probabilities as one 32-bit mma operand; `sum` gets the
  // rounded values, so the weights normalized by are the ones multiplied.
  if (bf16)
    os << "static __device__ __forceinline__ unsigned packPair(float x, float y, "
          "float &sum) {\n"
          "  const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);\n"
          "  sum += __low2float(v) + __high2float(v);\n"
          "  return *reinterpret_cast<const unsigned *>(&v);\n"
          "}\n"
          "static __device__ __forceinline__ void storePair(elem_t *p, float x, "
          "float y) {\n"
          "  *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(x, y);\n"
          "}\n";
  else
    os << "static __device__ __forceinline__ unsigned packPair(float x, float y, "
          "float &sum) {\n"
          "  const __half2 v = __floats2half2_rn(x, y);\n"
          "  sum += __low2float(v) + __high2float(v);\n"
          "  return *reinterpret_cast<const unsigned *>(&v);\n"
          "}\n"
          "static __device__ __forceinline__ void storePair(elem_t *p, float x, "
          "float y) {\n"
          "  *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(x, y);\n"
          "}\n";
  os << kMmaHelpers;
}

std::vector<EmittedStep> emitPrefill(const AttentionShape &s, const EmitOptions &o) {
  int64_t keys = prefillKeyTile(s.headDim);
  EmittedKernel k;
  k.name = kernelBaseName(s, "prefill");
  k.regionKind = "attention";
  {
    llvm::raw_string_ostream os(k.source);
    os << "// Weft attention, prefill: causal flash attention on tensor cores "
          "(mma.sync m16n8k16)\n// over the paged KV cache.\n";
    emitElementHelpers(os, s.elem);
    emitModelConstants(os, s, o, /*chunkKernel=*/true);
    os << "constexpr int kRows = " << kPrefillRows << "; // query rows per block\n"
       << "constexpr int kKeys = " << keys << "; // keys per tile\n"
       << "constexpr int kWarps = " << kPrefillWarps << ";\n"
       << "constexpr int kThreads = kWarps * 32;\n"
       << "constexpr int kPad = kHeadDim + 8; // row pitch: conflict-free ldmatrix\n"
       << "constexpr int kDimChunks = kHeadDim / 8; // 16-byte pieces of a row\n"
       << "constexpr int kStageElems = 2 * kKeys * kPad;\n"
       << "constexpr int kCopies = kKeys * kDimChunks; // 16-byte copies per tile and tensor\n"
       << "constexpr int kCopiesPerThread = (kCopies + kThreads - 1) / kThreads;\n"
       << kRowHelpers;
    emitMmaHelpers(os, s.elem);
    os << "\nextern \"C\" __global__ void __launch_bounds__(kThreads) "
       << k.name
       << "(\n    const elem_t *__restrict__ query, const int *__restrict__ positions,\n"
          "    const int *__restrict__ slots, const elem_t *__restrict__ k_cache,\n"
          "    const elem_t *__restrict__ v_cache, const int *__restrict__ block_tables,\n"
          "    elem_t *__restrict__ out)"
       << kPrefillKernelBody;
    os.flush();
  }
  k.grid = {int((s.tokens + kPrefillRows - 1) / kPrefillRows), int(s.heads), 1};
  k.block = {kPrefillThreads, 1, 1};
  k.sharedBytes = int(prefillSharedBytes(s.headDim));
  k.params = {
      binding(ParamBinding::Kind::RegionInput, s.queryInput, "query"),
      binding(ParamBinding::Kind::RegionInput, s.positionsInput, "positions"),
      binding(ParamBinding::Kind::RegionInput, s.slotsInput, "slots"),
      binding(ParamBinding::Kind::KCache, s.layer, "k_cache"),
      binding(ParamBinding::Kind::VCache, s.layer, "v_cache"),
      binding(ParamBinding::Kind::BlockTables, 0, "block_tables"),
      binding(ParamBinding::Kind::RegionResult, 0, "out"),
  };
  std::vector<EmittedStep> steps(1);
  steps[0].kernel = std::move(k);
  return steps;
}

} // namespace

AttentionSplitPlan planAttentionSplits(int64_t tokens, int64_t numHeads,
                                       int64_t kvHeads, int64_t headDim,
                                       int64_t elementBytes, int64_t maxSpan,
                                       int64_t smCount) {
  AttentionSplitPlan p;
  int64_t group = std::max<int64_t>(1, numHeads / std::max<int64_t>(1, kvHeads));
  // A decode batch mixes lengths: one long sequence alone must fill the GPU,
  // so its token count does not divide the target (splits past a short
  // sequence's span exit at once). A larger launch on these kernels is a
  // prefill chunk of one sequence, whose tokens share the work.
  int64_t splitTokens = tokens > kMaxGemvTokens ? tokens : 1;
  if (kDecodeTensorCores && group > kDecodeTcMinGroup && elementBytes == 2 &&
      headDim % 16 == 0 && headDim <= 128) {
    // Tensor cores: up to 16 query heads per block as the mma's rows. With
    // small groups the SIMT kernel's deeper cp.async pipeline streams K/V
    // faster (measured on H200: groups of 4 and 1); for bigger groups its
    // FMAs and shuffles become the limit and the mma path wins (group 8,
    // 32k positions of llama-3.1-70b: 48 µs against 97 µs).
    p.tensorCores = true;
    p.headBlocks = (group + 15) / 16;
    p.headsPerBlock = (group + p.headBlocks - 1) / p.headBlocks;
    p.warps = kDecodeTcWarps;
    p.keysPerTile = 16 * p.warps;
    int64_t stageBytes = 2 * p.keysPerTile * (headDim + 8) * elementBytes;
    p.stages = std::clamp<int64_t>(kMaxSharedBytes / stageBytes, 2, 4);
    p.granule = std::max<int64_t>(64, p.keysPerTile);
    int64_t blocksPerSplit = std::max<int64_t>(1, splitTokens * kvHeads * p.headBlocks);
    int64_t target = kDecodeTcBlocksPerSm * std::max<int64_t>(1, smCount);
    int64_t maxSplits = std::max<int64_t>(1, (maxSpan + p.granule - 1) / p.granule);
    p.splits = std::clamp<int64_t>((target + blocksPerSplit - 1) / blocksPerSplit, 1,
                                   maxSplits);
    return p;
  }
  // The widest load (16 bytes at most) that tiles a head row.
  int64_t vecBytes = 16;
  while (vecBytes > 4 && (headDim * elementBytes) % vecBytes != 0)
    vecBytes /= 2;
  p.vec = std::max<int64_t>(1, vecBytes / elementBytes);
  int64_t chunks = std::max<int64_t>(1, headDim / p.vec);
  p.lanesPerRow = 1;
  while (p.lanesPerRow * 2 <= std::min<int64_t>(chunks, 32))
    p.lanesPerRow *= 2;
  p.chunksPerLane = (chunks + p.lanesPerRow - 1) / p.lanesPerRow;
  // The query and the accumulator are heads * perLane floats each per lane;
  // past 64 of each they would spill, so big groups take several blocks.
  int64_t perLane = p.vec * p.chunksPerLane;
  int64_t maxHeads = std::max<int64_t>(1, kDecodeLaneFloats / perLane);
  p.headBlocks = (group + maxHeads - 1) / maxHeads;
  p.headsPerBlock = (group + p.headBlocks - 1) / p.headBlocks;
  p.unroll = p.headsPerBlock * perLane <= 32 ? 4 : 2;
  p.warps = kDecodeThreads / 32;
  // Shared memory: as many stages of K/V rows as fit 48 KiB (2 to 4).
  auto stageBytes = [&] {
    return 2 * p.warps * (32 / p.lanesPerRow) * p.unroll * headDim * elementBytes;
  };
  while (p.unroll > 1 && 2 * stageBytes() > kMaxSharedBytes)
    p.unroll /= 2;
  p.stages = std::clamp<int64_t>(kMaxSharedBytes / stageBytes(), 2, 4);
  int64_t perIteration = p.warps * (32 / p.lanesPerRow) * p.unroll;
  p.granule = std::max<int64_t>(64, perIteration);
  // About four blocks per SM, but no split shorter than a granule of the
  // longest possible span.
  int64_t blocksPerSplit = std::max<int64_t>(1, splitTokens * kvHeads * p.headBlocks);
  int64_t target = kDecodeBlocksPerSm * std::max<int64_t>(1, smCount);
  int64_t splits = (target + blocksPerSplit - 1) / blocksPerSplit;
  int64_t maxSplits = std::max<int64_t>(1, (maxSpan + p.granule - 1) / p.granule);
  p.splits = std::clamp<int64_t>(splits, 1, maxSplits);
  return p;
}

llvm::Expected<std::vector<EmittedStep>>
emitAttentionRegion(FusionOp region, const EmitOptions &options) {
  if (region.getKind() != "attention")
    return fail("kind is '" + region.getKind() + "', not 'attention'");
  llvm::Expected<AttentionShape> shape = readShape(region);
  if (!shape)
    return shape.takeError();
  if (options.blockTokens < 1 || options.maxBlocksPerSequence < 1 ||
      options.maxSequences < 1)
    return fail("block_tokens, max_blocks_per_sequence and max_sequences must "
                "be positive");
  if (options.computeCapability < 80)
    return fail("the attention kernels need sm_80 or newer (cp.async, bf16 mma), "
                "not sm_" + llvm::Twine(options.computeCapability));
  int64_t maxContext = options.blockTokens * options.maxBlocksPerSequence;
  if (maxContext > (int64_t(1) << 30))
    return fail("the cache's per-sequence capacity does not fit 32-bit positions");
  int64_t maxSpan = shape->window ? std::min(shape->window, maxContext) : maxContext;
  // Above the GEMV sizes a step may mix decode tokens of many sequences with
  // prefill chunks: flash-decoding takes the one-token sequences, then the
  // chunk kernel the rest (each writes only the rows it owns).
  bool chunks = shape->tokens > kMaxGemvTokens && prefillTakesTensorCores(*shape, options);
  std::vector<EmittedStep> steps = emitDecode(*shape, options, maxSpan, chunks);
  if (chunks)
    for (EmittedStep &step : emitPrefill(*shape, options))
      steps.push_back(std::move(step));
  return steps;
}

} // namespace weft::cuda

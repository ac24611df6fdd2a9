// Projections of few tokens: the GEMV of weft/gemv.cuh over all tokens in
// one pass over the weights (split K where the grid would be too small),
// and the epilogues of weft/epilogue.cuh that every projection kernel
// composes in its Config.
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
// Projection epilogues (weft/epilogue.cuh), shared by the GEMV kernel, its
// split-K reduce kernel and the prefill epilogue and split kernels
//===----------------------------------------------------------------------===//

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

void writeHeadGroup(llvm::raw_ostream &os, const HeadGroupConfig &g) {
  os << "struct " << g.name << " : weft::kernels::HeadGroup {\n"
     << "  static constexpr int HEADS = " << g.heads;
  if (g.in >= 0)
    os << ", IN = " << g.in;
  if (g.table >= 0) {
    os << ", TABLE = " << g.table;
    if (g.positions >= 0)
      os << ", POSITIONS = " << g.positions;
  }
  if (g.normWeight >= 0)
    os << ", NORM_W = " << g.normWeight;
  if (g.cache)
    os << ", CACHE = " << g.cache;
  if (g.outs)
    os << ", OUT = " << g.out << ", OUTS = " << g.outs;
  os << ";\n";
  if (g.normWeight >= 0)
    os << "  static constexpr float EPS = " << floatLiteral(g.eps) << ";\n";
  if (g.normType)
    os << "  using norm_t = " << cudaType(*g.normType) << ";\n";
  if (g.partType)
    os << "  using part_t = " << cudaType(*g.partType) << ";\n";
  os << "  using res_t = " << cudaType(g.resultType) << ";\n"
     << "};\n";
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
      int64_t first = int64_t(e.params.size());
      e.addResults(cudaType(s.resultType), s.results, "out" + std::to_string(i));
      HeadGroupConfig g;
      g.name = name;
      g.heads = s.size / p.headDim;
      g.table = s.table;
      g.cache = s.cache;
      g.out = first;
      g.outs = int64_t(s.results.size());
      g.partType = s.type;
      g.resultType = s.resultType;
      writeHeadGroup(os, g);
      groups.push_back(name);
    }
    os.flush();
    e.config += "  using Epilogue = weft::kernels::RopeEpilogue<" + bias + ", " +
                std::to_string(positions) + ", " + cache + ", " + llvm::join(groups, ", ") +
                ">;\n";
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

int64_t gemvTileTokens(const Projection &p, const EmitOptions &o) {
  return planGemv(p, o).tileTokens;
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
                                  std::optional<ParamBinding> xFrom) {
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
                             ParamBinding in, bool addBias) {
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

} // namespace weft::cuda::detail

// The decode stream kernel: a whole batch-1 decode step of a run of
// Llama-style layers as one persistent kernel (weft/decode_stream.cuh) and
// the launch that zeroes its counters; docs/codegen.md, "One stream kernel
// per batch-1 decode step".
#include "targets/CUDA/EmitterSupport.h"
#include "targets/CUDA/KernelEmitter.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace weft::cuda {

using namespace detail;
using mlir::Operation;
using mlir::Value;

namespace {

// Ring stage: room for 4 rows of the widest K among QKV, O and gate/up, or
// one row of the down projection's; the kernel's Proj derives the chunks.
struct StreamGeometry {
  int64_t stageBytes = 0, stages = 0, inFlight = 0, maxRows = 0, splits = 0, grid = 0,
          sharedBytes = 0;
};

int64_t divisorAtMost(int64_t n, int64_t m) {
  int64_t d = std::max<int64_t>(1, m);
  while (d > 1 && n % d != 0)
    --d;
  return d;
}

} // namespace

llvm::Expected<std::vector<EmittedStep>> emitDecodeStream(llvm::ArrayRef<FusionOp> regions,
                                                          const EmitOptions &options,
                                                          std::string &why) {
  why.clear();
  auto refuse = [&](const llvm::Twine &reason) {
    why = reason.str();
    return std::vector<EmittedStep>();
  };
  constexpr size_t kPerLayer = std::size(kDecodeStreamLayerKinds);
  if (options.computeCapability < 90)
    return refuse("bulk copies need sm_90");
  if (regions.empty() || regions.size() % kPerLayer != 0)
    return refuse("not whole layers");
  for (size_t i = 0; i < regions.size(); ++i)
    if (FusionOp r = regions[i]; r.getKind() != kDecodeStreamLayerKinds[i % kPerLayer])
      return refuse("region " + llvm::Twine(i) + " is '" + r.getKind() + "'");
  const int64_t layers = int64_t(regions.size() / kPerLayer);

  int64_t hidden = 0, ffn = 0, heads = 0, kvHeads = 0, headDim = 0, bits = -1;
  QuantFormat format = QuantFormat::Int;
  double eps = -1.0, scale = 0.0;
  std::vector<double> invFreq;
  ElementType t = ElementType::F16;
  auto input = [](int64_t region, int64_t index, llvm::StringRef name) {
    ParamBinding b{ParamBinding::Kind::RegionInput, index};
    b.region = region;
    b.name = name.str();
    return b;
  };
  struct LayerParams {
    ParamBinding norm1, qkv, k, v, o, norm2, gateUp, down;
    ParamBinding qkvPairs, oPairs, gateUpPairs, downPairs; // codes: pairs or scales
  };
  auto pairsOf = [](ParamBinding b) {
    b.part = 1;
    b.name += "_pairs";
    return b;
  };
  std::vector<LayerParams> perLayer;
  ParamBinding x, positions, slots, out;
  Value layerInput;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t r0 = l * int64_t(kPerLayer);
    FusionOp qkvR = regions[size_t(r0)], attnR = regions[size_t(r0 + 1)],
             oR = regions[size_t(r0 + 2)], mlpR = regions[size_t(r0 + 3)],
             downR = regions[size_t(r0 + 4)];
    std::optional<Projection> pr[4];
    FusionOp projRegions[4] = {qkvR, oR, mlpR, downR};
    for (int i = 0; i < 4; ++i) {
      llvm::Expected<std::optional<Projection>> a = analyzeProjection(projRegions[i]);
      if (!a)
        return a.takeError();
      if (!*a)
        return refuse("region " + llvm::Twine(r0 + (i ? i + 1 : 0)) + " is not a projection");
      pr[i] = **a;
      const Projection &p = *pr[i];
      if (p.tokens != 1)
        return refuse("more than one token");
      // 4-bit integer codes in 16-row tiles with a pair per 128 inputs (the
      // kernel's tensor-core consumer), or 8-bit codes in rows with one
      // pair or scale per row (its CUDA-core consumer); every projection
      // alike.
      const bool tiled4 = p.quantBits == 4 && p.quantFormat == QuantFormat::Int &&
                          p.quantTiled && p.quantGroup == 128;
      const bool rows8 = p.quantBits == 8 && !p.quantTiled &&
                         (p.quantFormat == QuantFormat::E4M3 || p.quantGroup == p.k);
      if (p.quantBits != 0 && !tiled4 && !rows8)
        return refuse("quantized weights other than 4-bit integer codes in 16-row tiles "
                      "(group 128) or 8-bit codes with a scale per row");
      if (bits < 0) {
        bits = p.quantBits;
        format = p.quantFormat;
      } else if (p.quantBits != bits || (bits != 0 && p.quantFormat != format)) {
        return refuse("projections of different weight formats");
      }
      if (p.biasIn >= 0)
        return refuse("a projection bias");
      if (p.normOffset != 0.0 || p.gelu)
        return refuse("a Gemma-style norm or GeGLU");
      if (p.weightType != p.xType || (p.xType != ElementType::F16 && p.xType != ElementType::BF16))
        return refuse("weights and activations must be one 16-bit type");
      if (p.normIn >= 0 && p.normType != p.xType)
        return refuse("norm weights of another type");
      if (l == 0 && i == 0)
        t = p.xType;
      else if (p.xType != t)
        return refuse("layers of different types");
      if (p.normIn >= 0) {
        if (eps >= 0.0 && p.eps != eps)
          return refuse("norms with different epsilons");
        eps = p.eps;
      }
    }
    const Projection &pq = *pr[0], &po = *pr[1], &pm = *pr[2], &pd = *pr[3];
    // QKV: RMSNorm, then Q rotated (yielded), K rotated (cached), V cached.
    if (pq.epilogue != Epilogue::Rope || pq.normIn < 0 || pq.segments.size() != 3 ||
        pq.ropeTables.size() != 1 || pq.segments[0].table != 0 || pq.segments[0].cache != 0 ||
        pq.segments[0].results.size() != 1 || pq.segments[1].table != 0 ||
        pq.segments[1].cache != 1 || pq.segments[2].table != -1 || pq.segments[2].cache != 2 ||
        pq.cacheType != t || pq.segments[0].resultType != t)
      return refuse("the QKV region is not norm -> projection -> RoPE of Q and K, cache write");
    if (l == 0) {
      hidden = pq.k;
      headDim = pq.headDim;
      kvHeads = pq.kvHeads;
      heads = pq.segments[0].size / std::max<int64_t>(1, headDim);
      invFreq = pq.ropeTables[0];
    } else if (pq.k != hidden || pq.headDim != headDim || pq.kvHeads != kvHeads ||
               pq.ropeTables[0] != invFreq) {
      return refuse("layers of different shapes");
    }
    if (pq.ropePositionsIn != pq.writePositionsIn)
      return refuse("RoPE and the cache write read different positions");
    // Attention over the cache of this layer, on the QKV region's Q.
    AttentionOp attn;
    for (Operation &op : attnR.getBody().front().without_terminator())
      attn = llvm::dyn_cast<AttentionOp>(op);
    if (!attn)
      return refuse("no attention op");
    if (attn.getSoftcap() || attn.getSlidingWindow())
      return refuse("a sliding window or soft-capped scores");
    if (attn.getNumHeads() != heads || attn.getNumKvHeads() != kvHeads ||
        attn.getHeadDim() != headDim || int64_t(attn.getLayer()) != pq.layer)
      return refuse("attention of another shape or layer");
    auto attnArg = [&](Value v) -> Value {
      auto arg = llvm::dyn_cast<mlir::BlockArgument>(v);
      return arg ? attnR.getInputs()[arg.getArgNumber()] : Value();
    };
    Value qValue = qkvR.getResult(unsigned(pq.segments[0].results[0]));
    if (attnArg(attn.getQuery()) != qValue ||
        attnArg(attn.getPositions()) != qkvR.getInputs()[size_t(pq.ropePositionsIn)] ||
        attnArg(attn.getSlots()) != qkvR.getInputs()[size_t(pq.slotsIn)])
      return refuse("attention does not read this layer's query, positions and slots");
    double sc = attn.getScale().convertToDouble();
    if (l > 0 && sc != scale)
      return refuse("layers of different attention scales");
    scale = sc;
    // O + residual (the layer input), norm + gate/up + SwiGLU, down + residual.
    Value xIn = qkvR.getInputs()[size_t(pq.xIn)];
    if (l > 0 && xIn != layerInput)
      return refuse("layer " + llvm::Twine(l) + " does not read the previous layer's output");
    if (po.epilogue != Epilogue::Residual || po.normIn >= 0 || po.k != heads * headDim ||
        po.nw != hidden || oR.getInputs()[size_t(po.xIn)] != attnR.getResult(0) ||
        oR.getInputs()[size_t(po.residualIn)] != xIn || po.outResults.size() != 1)
      return refuse("the O region is not projection + residual of the layer input");
    Value h = oR.getResult(unsigned(po.outResults[0]));
    if (pm.epilogue != Epilogue::Swiglu || pm.normIn < 0 || pm.k != hidden ||
        pm.gateOffset != 0 || pm.upOffset != pm.width || mlpR.getInputs()[size_t(pm.xIn)] != h ||
        pm.outResults.size() != 1)
      return refuse("the MLP region is not norm -> gate/up -> SwiGLU");
    if (l == 0)
      ffn = pm.width;
    else if (pm.width != ffn)
      return refuse("layers of different widths");
    Value act = mlpR.getResult(unsigned(pm.outResults[0]));
    if (pd.epilogue != Epilogue::Residual || pd.normIn >= 0 || pd.k != ffn || pd.nw != hidden ||
        downR.getInputs()[size_t(pd.xIn)] != act || downR.getInputs()[size_t(pd.residualIn)] != h ||
        pd.outResults.size() != 1)
      return refuse("the down region is not projection + residual");
    layerInput = downR.getResult(unsigned(pd.outResults[0]));
    if (l == 0) {
      x = input(r0, pq.xIn, "x");
      positions = input(r0, pq.ropePositionsIn, "positions");
      slots = input(r0, pq.slotsIn, "slots");
    }
    if (l + 1 == layers) {
      out = ParamBinding{ParamBinding::Kind::RegionResult, pd.outResults[0]};
      out.region = r0 + 4;
      out.name = "out";
    }
    std::string n = "l" + std::to_string(l) + "_";
    LayerParams lp{input(r0, pq.normIn, n + "norm1"),
                   input(r0, pq.weightIn, n + "qkv"),
                   binding(ParamBinding::Kind::KCache, pq.layer, n + "k"),
                   binding(ParamBinding::Kind::VCache, pq.layer, n + "v"),
                   input(r0 + 2, po.weightIn, n + "o"),
                   input(r0 + 3, pm.normIn, n + "norm2"),
                   input(r0 + 3, pm.weightIn, n + "gate_up"),
                   input(r0 + 4, pd.weightIn, n + "down")};
    lp.qkvPairs = pairsOf(lp.qkv);
    lp.oPairs = pairsOf(lp.o);
    lp.gateUpPairs = pairsOf(lp.gateUp);
    lp.downPairs = pairsOf(lp.down);
    perLayer.push_back(lp);
  }
  if (headDim != 128)
    return refuse("head_dim " + llvm::Twine(headDim) + " (the kernel takes 128)");
  if (kvHeads < 1 || heads % kvHeads != 0 || heads / kvHeads > 4)
    return refuse("more than 4 query heads per KV head");
  const bool codes = bits == 4, codes8 = bits == 8;
  // Consumer warps a block (8 unless EmitOptions::decodeStreamWarps says
  // 16): with 4-bit codes each takes whole 128-input steps of a stage, so
  // every width is a multiple of 128 of them. 16 warps (17 with the
  // producer) leave ptxas 96 registers a thread, and 4-bit codes measured
  // slower so (benchmarks.md, "Sixteen consumer warps for 4-bit codes").
  auto widthsDivide = [&](int64_t n) {
    return hidden % n == 0 && ffn % n == 0 && (heads * headDim) % n == 0;
  };
  const int64_t cw = options.decodeStreamWarps != 0 ? options.decodeStreamWarps : 8;
  if (cw != 8 && cw != 16)
    return refuse(llvm::Twine(cw) + " consumer warps (8 or 16)");
  if (!widthsDivide(8 * cw))
    return refuse("widths that are not multiples of " + llvm::Twine(8 * cw));
  if (codes && !widthsDivide(128 * cw))
    return refuse("4-bit codes with widths that are not multiples of " + llvm::Twine(128 * cw) +
                  " (" + llvm::Twine(cw) + " consumer warps)");

  // Geometry: a block per SM; KV_HEADS * SPLITS attention items.
  StreamGeometry g;
  g.grid = options.smCount;
  g.splits = std::min<int64_t>(16, g.grid / kvHeads);
  if (g.splits < 1)
    return refuse("fewer SMs than KV heads");
  const int64_t ks[4] = {hidden, heads * headDim, hidden, ffn};
  const int64_t group = heads / kvHeads;
  // 4-bit codes: a unit of one or two 16-row tiles a stage (weft::kernels::
  // stream::QProj), its pairs in a slot of SCALE_SLOTS; the staged input
  // shares the attention merge's room.
  int64_t scaleSlots = 0, scaleSlotBytes = 0, stagedInput = 0;
  if (codes) {
    g.stageBytes = 32 * 1024;
    scaleSlots = 3;
    scaleSlotBytes = std::max({hidden, heads * headDim / 2, ffn / 2});
    stagedInput = 2 * std::max({hidden, heads * headDim, ffn});
    const int64_t units[4] = {(heads + 2 * kvHeads) * headDim / 32, hidden / 16, ffn / 16,
                              hidden / 16};
    for (int kind = 0; kind < 4; ++kind) {
      const bool paired = kind == 0 || kind == 2;
      g.maxRows = std::max(g.maxRows, ceilDiv(units[kind], g.grid) * (paired ? 32 : 16));
    }
  } else {
    // Whole rows a chunk: 16-bit weights, or 8-bit codes (twice the rows).
    g.stageBytes = roundUp(std::max({4 * hidden * 2, 4 * heads * headDim * 2, ffn * 2}), 128);
    const int64_t rowBytesPerInput = codes8 ? 1 : 2;
    for (int kind = 0; kind < 4; ++kind) {
      const int64_t k = ks[kind], fit = g.stageBytes / (rowBytesPerInput * k);
      if (codes8 && fit > 32) // the consumers' one reduction a chunk takes 32 rows
        return refuse("8-bit codes with more than 32 rows a stage");
      const bool paired = kind == 0 || kind == 2;
      const int64_t cols =
          kind == 0 ? divisorAtMost(headDim / 2, fit / 2) : paired ? fit / 2 : fit;
      const int64_t n =
          kind == 0 ? (heads + 2 * kvHeads) * headDim / 2 : kind == 2 ? ffn : hidden;
      const int64_t chunks = ceilDiv(n, cols);
      g.maxRows = std::max(g.maxRows, ceilDiv(chunks, g.grid) * (paired ? 2 * cols : cols));
    }
  }
  // As weft::kernels::stream::sharedBytes (which checks it): the pairs'
  // ring and its barriers, the stages' barriers, row sums, norm sums, the
  // attention merge (or staged input), an item's pages and, with 8-bit
  // codes, the rows' pairs or scales.
  const int64_t itemPages = ceilDiv(options.maxBlocksPerSequence, g.splits) + 2;
  const int64_t merge = std::max((cw * group * headDim + 2 * cw * group) * 4, stagedInput);
  const int64_t rest = scaleSlots * (scaleSlotBytes + 16) + 2 * 8 * 8 /*mbarriers*/ +
                       g.maxRows * cw * 4 + cw * 4 + merge + itemPages * 4 +
                       (codes8 ? g.maxRows * 8 : 0);
  const int64_t staticBytes = layers * 96; // the layer table
  const int64_t budget = 227 * 1024 - staticBytes - rest;
  // Up to 6 stages with 16-bit weights, 4 with 4-bit codes, whose consumers
  // set the pace: 4 stages measured 6% faster than 5 (and 3 no faster than
  // 4; benchmarks.md, "Inside a layer of the stream kernel"); with fuller
  // stages and a smaller stack frame since, 5 were still no faster.
  g.stages = std::min<int64_t>(codes ? 4 : 6, budget / g.stageBytes);
  if (g.stages < 2)
    return refuse("shared memory for fewer than two stages");
  g.sharedBytes = g.stages * g.stageBytes + rest;
  // Stages requested and not yet landed, at most: with 16-bit weights 2 of
  // the 6, which took the step 2-3% faster on an H200 than 3, 4 or 6 (1 was
  // 1.5% slower): copies in flight queue ahead of the hand-offs' loads and
  // stores, landed ones do not. With 4-bit codes no cap was faster.
  // (benchmarks.md, "Copies in flight against landed stages".)
  g.inFlight = codes ? g.stages : std::min<int64_t>(2, g.stages);

  const char *tn = cudaType(t);
  const bool e4m3 = codes8 && format == QuantFormat::E4M3;
  const char *formatNote = codes ? "4-bit codes in 16-row tiles, a (scale, zero) pair per 128 inputs"
                           : e4m3 ? "FP8 E4M3 codes in rows, an f32 scale per row"
                           : codes8 ? "8-bit codes in rows, a (scale, zero) pair per row"
                                    : "16-bit weights";
  const int64_t actBytes = layers * (2 * heads * headDim + 2 * hidden + ffn) * 2;
  const int64_t partialBytes = heads * g.splits * (headDim + 2) * 4;
  const int64_t counters = layers * 5 + layers * kvHeads;

  LibraryKernel k;
  k.what = "A whole decode step of one token: " + std::to_string(layers) + " layers, hidden " +
           std::to_string(hidden) + ", FFN " + std::to_string(ffn) + ", " +
           std::to_string(heads) + " heads / " + std::to_string(kvHeads) + " KV heads of " +
           std::to_string(headDim) + ", one persistent block per SM.";
  k.header = "weft/decode_stream.cuh";
  {
    llvm::raw_string_ostream os(k.preamble);
    os << "__constant__ double wf_inv_freq[" << invFreq.size() << "] = {";
    for (size_t i = 0; i < invFreq.size(); ++i)
      os << (i ? ", " : "") << doubleLiteral(invFreq[i]);
    os << "};\n";
  }
  {
    llvm::raw_string_ostream os(k.config);
    os << "  using t = " << tn << ";\n"
       << "  // " << formatNote << "\n"
       << "  static constexpr int BITS = " << (codes ? 4 : codes8 ? 8 : 0) << ";\n"
       << "  static constexpr weft::kernels::Codes FORMAT = weft::kernels::Codes::"
       << (e4m3 ? "E4M3" : "Int") << ";\n"
       << "  using w_t = " << (codes ? "unsigned" : codes8 ? "unsigned char" : tn) << ";\n"
       << "  static constexpr int LAYERS = " << layers << ", HIDDEN = " << hidden
       << ", FFN = " << ffn << ";\n"
       << "  static constexpr int HEADS = " << heads << ", KV_HEADS = " << kvHeads
       << ", D = " << headDim << ", GROUP = " << group << ", CW = " << cw << ";\n"
       << "  static constexpr int QKV_ROWS = " << (heads + 2 * kvHeads) * headDim << ";\n"
       << "  static constexpr float EPS = " << floatLiteral(eps) << ";\n"
       << "  static constexpr double SCALE_LOG2 = " << doubleLiteral(scale * 1.4426950408889634)
       << ";\n"
       << "  static constexpr int BLOCK_TOKENS = " << options.blockTokens
       << ", MAX_BLOCKS = " << options.maxBlocksPerSequence
       << ", MAX_SEQUENCES = " << options.maxSequences << ";\n"
       << "  static constexpr int SPLITS = " << g.splits << ", STAGES = " << g.stages
       << ", IN_FLIGHT = " << g.inFlight << ", STAGE_BYTES = " << g.stageBytes
       << ", SCALE_SLOTS = " << scaleSlots << ", MAX_ROWS = " << g.maxRows
       << ", GRID = " << g.grid << ";\n"
       << "  static constexpr long SHARED_BYTES = " << g.sharedBytes << ";\n"
       << "  // the sizes the compiler gave the counters and activations (checked)\n"
       << "  static constexpr int COUNTERS = " << counters << ";\n"
       << "  static constexpr long ACT_BYTES = " << actBytes << ";\n"
       << "  static __device__ __forceinline__ double invFreq(int i) { return wf_inv_freq[i]; }\n";
  }

  k.params = {
      x, positions, slots, binding(ParamBinding::Kind::BlockTables, 0, "block_tables"), out,
      scratchBinding(0, uint64_t(actBytes), "act"),
      scratchBinding(1, uint64_t(partialBytes), "partials"),
      scratchBinding(2, uint64_t(counters) * 4, "counters")};
  // Each layer's pointers, as weft::kernels::stream::decodeStreamKernel
  // takes them.
  std::string pack;
  for (const LayerParams &lp : perLayer) {
    for (const ParamBinding &b : {lp.norm1, lp.qkv, lp.k, lp.v, lp.o, lp.norm2, lp.gateUp, lp.down})
      k.params.push_back(b);
    pack += ", const Config::t, const Config::w_t, Config::t, Config::t, const Config::w_t, "
            "const Config::t, const Config::w_t, const Config::w_t";
    if (codes || codes8) {
      for (const ParamBinding &b : {lp.qkvPairs, lp.oPairs, lp.gateUpPairs, lp.downPairs})
        k.params.push_back(b);
      pack += ", const unsigned, const unsigned, const unsigned, const unsigned";
    }
  }
  k.instance = "weft::kernels::stream::decodeStreamKernel<Config" + pack + ">";
  k.grid = {int(g.grid), 1, 1};
  k.block = {32 * (int(cw) + 1), 1, 1};
  k.sharedBytes = int(g.sharedBytes);
  std::string base = "weft_decode_stream_l" + std::to_string(layers) + "_h" +
                     std::to_string(hidden) + "_f" + std::to_string(ffn) + "_" +
                     elementTypeName(t) + (codes ? "_int4" : e4m3 ? "_fp8" : codes8 ? "_int8" : "");
  EmittedKernel stream = libraryKernel("decode_stream", base, std::move(k));
  stream.cooperative = true;

  LibraryKernel resetKernel;
  resetKernel.what = "Zeroes the decode stream kernel's " + std::to_string(counters) +
                     " counters before it runs";
  resetKernel.header = "weft/decode_stream.cuh";
  resetKernel.config = "  static constexpr int COUNTERS = " + std::to_string(counters) + ";\n";
  resetKernel.instance = "weft::kernels::stream::resetCountersKernel<Config>";
  resetKernel.grid = {1, 1, 1};
  resetKernel.block = {256, 1, 1};
  resetKernel.params = {scratchBinding(2, uint64_t(counters) * 4, "counters")};
  EmittedKernel reset = libraryKernel("decode_stream", "weft_decode_stream_reset_n" +
                                                           std::to_string(counters),
                                      std::move(resetKernel));
  std::vector<EmittedStep> steps;
  steps.push_back(kernelStep(std::move(reset)));
  steps.push_back(kernelStep(std::move(stream)));
  return steps;
}

} // namespace weft::cuda

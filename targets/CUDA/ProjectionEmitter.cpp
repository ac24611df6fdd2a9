// The steps of a projection region: the GEMV for few tokens
// (GemvEmitter.cpp); for many, an RMSNorm kernel, a cuBLASLt GEMM and the
// kernels that finish its rows (split, SwiGLU, RoPE and the cache write);
// quantized weights expanded first; the LM head of sampled rows only.
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
    const int64_t tileTokens = gemvTileTokens(p, o);
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

} // namespace weft::cuda::detail

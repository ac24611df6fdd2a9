// What the kernel emitters of targets/CUDA share inside the compiler: the
// helpers that turn a Config into an EmittedKernel (EmitterSupport.cpp), the
// analysis of a projection region (ProjectionAnalysis.cpp) and the emitters
// one region kind calls in another's file. Where each kind of region is
// emitted:
//   KernelEmitter.cpp       the dispatch on a region's body, the embedding,
//                           the all-reduce's accumulate kernel
//   GemvEmitter.cpp         projections of few tokens (weft/gemv.cuh) and
//                           the epilogues every projection kernel composes
//                           (weft/epilogue.cuh)
//   ProjectionEmitter.cpp   a projection region's steps: the GEMV, or
//                           RMSNorm + cuBLASLt + the kernels over its rows
//   SelectionEmitter.cpp    argmax, soft cap and sampling over logits rows
//   RopeKvWriteEmitter.cpp  RoPE and the KV-cache write as their own region
//   AttentionEmitter.cpp    attention (prefill and decode)
//   DecodeStreamEmitter.cpp the persistent kernel of a whole decode step
// Nothing outside targets/CUDA includes this header.
#ifndef WEFT_TARGETS_CUDA_EMITTERSUPPORT_H_
#define WEFT_TARGETS_CUDA_EMITTERSUPPORT_H_

#include "targets/CUDA/KernelEmitter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace weft::cuda::detail {

llvm::Error regionError(FusionOp region, const llvm::Twine &why);
int64_t ceilDiv(int64_t a, int64_t b);
int64_t roundUp(int64_t a, int64_t b);
std::string doubleLiteral(double v); // 17 significant digits, a C++ double literal

ParamBinding binding(ParamBinding::Kind kind, int64_t index, llvm::StringRef name);
ParamBinding scratchBinding(int64_t index, uint64_t bytes, llvm::StringRef name);
// A pointer parameter the kernel's Config does not use (a GEMV's norm weight
// without a norm): null, as a Scalar 0.
ParamBinding nullBinding(llvm::StringRef name);
EmittedStep kernelStep(EmittedKernel k);
// The widest vector (elements, at most 16 bytes of the widest type) that
// divides every extent.
int64_t vectorWidth(int64_t widestBytes, llvm::ArrayRef<int64_t> extents);
std::string typeString(mlir::Type type); // for messages
// [rows, cols] of a static rank-2 tensor.
std::optional<std::pair<int64_t, int64_t>> matrixShape(mlir::Value v);
// The index of `v` among the region's operands (its block argument), or -1.
int64_t inputIndex(FusionOp region, mlir::Value v);
std::string identifier(llvm::StringRef s); // a C identifier of a region kind
// Whether every kernel of `region` releases its successor early (a 4-bit
// layer's one-token RoPE region, EmittedKernel::releaseEarly).
bool releasesEarlyAsFourBitRope(FusionOp region, const EmitOptions &o);

// A kernel that runs a __global__ template of the kernel library: the
// emitter writes only what the template reads, the body of the source's
// `struct Config` (constants, tile shapes, types), and names the template
// instance. libraryKernel adds Config::RELEASE_EARLY (common.cuh's
// wf_grid_dependency_enter) and names the kernel baseName plus a hash of
// its source and instance (or baseName alone, see hashName).
struct LibraryKernel {
  std::string what;     // what it computes: the source's first comment line(s)
  std::string header;   // the library header that holds the template, "weft/softcap.cuh"
  // Declarations Config names, written before it: a RoPE kernel's head
  // groups and frequency tables (each line ending in '\n').
  std::string preamble;
  std::string config;   // the lines of Config's body, each ending in '\n'
  std::string instance; // "weft::kernels::softcapRowsKernel<Config>"
  std::array<int, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::vector<ParamBinding> params;
  int sharedBytes = 0;
  bool releaseEarly = false;
  // false: the name is baseName alone, which says all the source depends on
  // (the attention kernels' shape names, kept for profiles and tests).
  bool hashName = true;
};
EmittedKernel libraryKernel(llvm::StringRef regionKind, llvm::StringRef baseName,
                            LibraryKernel k);
// ", T, T, ..." (n times; "" for none): the template arguments of a pack of
// one element per result, after Config.
std::string moreArgs(llvm::StringRef type, size_t n);
// ", T0, T1, ...": a pointer pack's template arguments, after Config.
std::string packArgs(const std::vector<std::string> &types);

//===----------------------------------------------------------------------===//
// Projections (linear / logits with their prologue and epilogue ops)
//===----------------------------------------------------------------------===//

enum class Epilogue { Plain, Split, Residual, Swiglu, Logits, Rope };

struct Segment {
  int64_t offset = 0, size = 0;
  llvm::SmallVector<int64_t, 1> results; // fusion results it is yielded as
  ElementType type = ElementType::BF16;
  // Rope epilogue: the rope table rotating this part (-1: none), the cache
  // it is written to (0 none, 1 K, 2 V), and the type of what is yielded
  // (the rope's result; `results` are the rope's).
  int64_t table = -1;
  int cache = 0;
  ElementType resultType = ElementType::BF16;
};

struct Projection {
  bool isLogits = false;
  int64_t tokens = 0, k = 0, nw = 0; // weight [nw, k]
  // Fusion operands.
  int64_t xIn = -1, normIn = -1, weightIn = -1, biasIn = -1, residualIn = -1;
  double eps = 0.0;
  double normOffset = 0.0; // Gemma: the norm scales by (offset + weight)
  bool gelu = false;       // Swiglu: GELU-tanh(gate) * up (Gemma's GeGLU)
  std::optional<double> logitsSoftcap; // Logits: cap * tanh(logit / cap)
  ElementType xType, normType = ElementType::F32, weightType, biasType = ElementType::F32,
                     linType, residualType = ElementType::F32, outType = ElementType::F32;
  ElementType normOutType = ElementType::F32; // the rms_norm result
  Epilogue epilogue = Epilogue::Plain;
  llvm::SmallVector<int64_t, 1> outResults; // Plain/Residual/Swiglu/Logits
  llvm::SmallVector<Segment, 3> segments;   // Split
  int64_t gateOffset = 0, upOffset = 0, width = 0; // Swiglu: columns = width
  // Rope: the split's parts are Q, K and V heads of headDim; a column is
  // the pair (i, i + headDim / 2) of a head, rotated by rope table
  // `Segment::table` at the rope's positions, and/or written to the cache
  // (KvWriteOp of `layer`) at the write's positions and slots.
  int64_t headDim = 0, kvHeads = 0, layer = 0;
  int64_t ropePositionsIn = -1, writePositionsIn = -1, slotsIn = -1;
  ElementType cacheType = ElementType::BF16;
  std::vector<std::vector<double>> ropeTables;
  // The weight's storage when quantized (#weft.quant): codes of quantBits
  // bits, a (scale, zero) pair per quantGroup inputs (integers) or an f32
  // scale per row (E4M3); 0: 16-bit weights.
  int64_t quantBits = 0, quantGroup = 0;
  // Plain: write the f32 sums (bias added) to this scratch id instead of
  // the results (-1), for an epilogue that runs as a kernel of its own.
  int64_t f32ScratchOut = -1;
  QuantFormat quantFormat = QuantFormat::Int;
  bool quantTiled = false; // codes in 16-row tiles of 128 inputs (#weft.quant's `tiled`)
  // Token selection after logits.
  enum class Select { None, Argmax, Sample } select = Select::None;
  llvm::SmallVector<int64_t, 1> idResults;
  int64_t temperatureIn = -1, topKIn = -1, topPIn = -1, uniformIn = -1;
  // Logits of a step's sampled rows only (EmitOptions::sampledRowsLogits,
  // weft/sampled_rows.cuh): the projection runs over `tokens` compact rows
  // a gather kernel wrote, and these buffers stand for its input rows,
  // sampling parameters, logits and tokens.
  struct Compact {
    ParamBinding x, temperature, topK, topP, uniform, logits, ids;
  };
  std::optional<Compact> compact;

  int64_t columns() const {
    return epilogue == Epilogue::Swiglu ? width : epilogue == Epilogue::Rope ? nw / 2 : nw;
  }
  int64_t rowsPerColumn() const {
    return epilogue == Epilogue::Swiglu || epilogue == Epilogue::Rope ? 2 : 1;
  }
};

// Recognizes [rms_norm] -> linear|logits -> [split [silu, mul] | split
// [rope, kv_write] | add | argmax | sample]; returns nothing if the body is
// something else.
llvm::Expected<std::optional<Projection>> analyzeProjection(FusionOp region);

// The region results each yielded value becomes (a value can be yielded
// more than once).
llvm::DenseMap<mlir::Value, llvm::SmallVector<int64_t, 1>> yieldedResults(FusionOp region);
bool onlyYielded(mlir::Value v);

//===----------------------------------------------------------------------===//
// Emitters one file calls in another
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
  std::string pack() const { return packArgs(types); }
};

// One head group of weft/rope_kv_write.cuh (queries, keys or values) as the
// struct a RoPE kernel's or epilogue's Config lists; -1 / 0 / none: the
// field keeps HeadGroup's default.
struct HeadGroupConfig {
  std::string name;
  int64_t heads = 0;
  int64_t in = -1, positions = -1, normWeight = -1; // pointers (a RoPE kernel's)
  int64_t table = -1;
  int cache = 0;
  int64_t out = 0, outs = 0;
  double eps = 0.0;
  std::optional<ElementType> partType, normType; // part_t (an epilogue's), norm_t
  ElementType resultType = ElementType::BF16;
};
// Writes `g` as `struct NAME : weft::kernels::HeadGroup {...};`.
void writeHeadGroup(llvm::raw_ostream &os, const HeadGroupConfig &g);

// The epilogue of `p` (GemvEmitter.cpp). `logitsScratch`: the scratch id of
// f32 logits that are not a region result; `o`: the cache geometry, for a
// RoPE epilogue's cache writes.
EpilogueCode projectionEpilogue(const Projection &p, bool withBias, int64_t logitsScratch,
                                const EmitOptions &o);
// The cache geometry a KV-cache write reads from Config, and the rope
// frequency tables (a __constant__ array before Config, invFreq in it).
std::string cacheConfig(int64_t kvHeads, ElementType cacheType, const EmitOptions &o);
void addRopeTables(const std::vector<std::vector<double>> &tables, int64_t half,
                   std::string &preamble, std::string &config);

// GemvEmitter.cpp: the GEMV of `p` (and its split-K reduce and argmax
// kernels); the epilogue of `p` over f32 rows [T, NW] in `in`.
std::vector<EmittedStep> emitGemv(FusionOp region, const Projection &p, const EmitOptions &o,
                                  std::optional<ParamBinding> xFrom = std::nullopt);
EmittedStep emitEpilogueRows(FusionOp region, const Projection &p, const EmitOptions &o,
                             ParamBinding in, bool addBias = true);
// The projection's input rows: the region's input, or a compact
// projection's compact rows.
ParamBinding xBinding(const Projection &p);
// Quantized projections of up to this many tokens run in the GEMV's
// tensor-core engine, in tiles of at most kMaxTileTokens / rows per column
// (it holds a tile's sums in registers, then 4 bytes per token and weight
// row in shared memory); more expand their codes to f16 for cuBLASLt
// (Llama 3.1 8B int4 on an H200: 100 tokens 15.5 ms and 512 tokens 45.9 ms
// per step through tiles, docs/benchmarks.md).
inline constexpr int64_t kMaxTileTokens = kMaxCodeGemvTokens;
// Quantized projections with a fused RMSNorm: up to this many tokens, each
// block reads the tokens' whole rows for their rms (PRENORM); more are
// normalized by a kernel of their own first.
inline constexpr int64_t kMaxPrenormTokens = 4;
// The tokens of one tile of the GEMV of `p` (all of them, or a divisor).
int64_t gemvTileTokens(const Projection &p, const EmitOptions &o);

// SelectionEmitter.cpp: where selection reads the logits and writes the
// tokens, and its kernels.
ParamBinding logitsBinding(const Projection &p);
std::vector<ParamBinding> idBindings(const Projection &p);
// Appends the token results to `k`'s parameters and names the template
// `entry` with one `int` pack element each.
void addIdsAndInstance(LibraryKernel &k, const Projection &p, llvm::StringRef entry);
std::vector<ParamBinding> samplingInputs(const Projection &p);
EmittedStep emitArgmaxRows(FusionOp region, const Projection &p);
EmittedStep emitSoftcapRows(FusionOp region, const Projection &p);
EmittedStep emitSample(FusionOp region, const Projection &p);

// ProjectionEmitter.cpp: a projection region's steps, and a norm with a
// residual add (Gemma 2's post-norms).
llvm::Expected<std::vector<EmittedStep>> emitProjection(FusionOp region, const Projection &p,
                                                        const EmitOptions &o);
llvm::Expected<std::vector<EmittedStep>> emitNormResidual(FusionOp region, RmsNormOp norm,
                                                          AddOp add);

// RopeKvWriteEmitter.cpp and KernelEmitter.cpp.
llvm::Expected<std::vector<EmittedStep>> emitRopeKvWrite(FusionOp region, const EmitOptions &o);
llvm::Expected<std::vector<EmittedStep>> emitEmbedding(FusionOp region, EmbeddingOp emb);

} // namespace weft::cuda::detail

#endif // WEFT_TARGETS_CUDA_EMITTERSUPPORT_H_

// CUDA C++ emission for weft.fusion regions: each region kind becomes one or
// more kernels whose every model dimension is a compile-time constant.
#ifndef WEFT_TARGETS_CUDA_KERNELEMITTER_H_
#define WEFT_TARGETS_CUDA_KERNELEMITTER_H_

#include "dialects/Weft/IR/WeftOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/Error.h"

#include <array>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::cuda {

// Element types of GEMM operands (weights keep their own type; logits are
// f32 while activations are f16/bf16).
enum class ElementType { F16, BF16, F32 };

// What one kernel parameter is bound to. The plan lowering resolves each
// binding to a device pointer or scalar; the kernel's C++ parameter list is
// exactly `params`, in order: pointers for everything but Scalar, which is
// a 64-bit integer.
struct ParamBinding {
  enum class Kind {
    RegionInput,  // index: operand of the weft.fusion (activation, weight,
                  // token vector); the lowering knows which it is
    RegionResult, // index: result of the weft.fusion
    KCache,       // index: the layer; its paged K cache:
                  // [blocks, block_tokens, kv_heads, head_dim]
    VCache,       // index: the layer; its paged V cache, same layout
    BlockTables,  // int32 [max_sequences, max_blocks_per_sequence]
    Slots,        // int32 [tokens]: the step's sequence slot of each row; `bytes`: what
                  // the kernel reads of it
    Scratch,      // index: scratch buffer id within the region; `bytes` big.
                  // Contents do not persist between launches: a kernel
                  // never relies on what an earlier run left there
    Scalar,       // value
  };
  Kind kind;
  int64_t index = 0;
  uint64_t bytes = 0; // Scratch: size in bytes (zero-initialized if zeroInit)
  bool zeroInit = false;
  // Scratch: the element type the kernel sees, for a buffer that stands in
  // for a typed activation or input a kernel binds elsewhere (the plan
  // records a kernel's first binding's type and holds the others to it);
  // Bytes: untyped.
  enum class ScratchType { Bytes, F16, BF16, F32, I32 } scratchType = ScratchType::Bytes;
  int64_t value = 0;  // Scalar
  // RegionInput of a quantized weight (#weft.quant): 0 its codes, 1 its
  // (scale, zero) pairs, which the plan holds as a second weight.
  int part = 0;
  std::string name;   // the C++ parameter name, for docs and FileCheck
  // RegionInput / RegionResult of a kernel spanning several regions
  // (emitDecodeStream): which of them; -1: the region being emitted.
  int64_t region = -1;
};

struct EmittedKernel {
  // Unique per source and entry: the base name of what it computes and a
  // hash ("weft_embedding_h4096_1a2b3c4d5e6f").
  std::string name;
  // The entry point, as a C++ name expression of a __global__ template of
  // the kernel library instantiated with the source's Config
  // ("weft::kernels::embeddingKernel<Config, __half>"); NVRTC lowers it
  // to the symbol the binary holds. Every kernel the emitters write has
  // one (an empty instance: a source that defines an extern "C" entry
  // named `name`, which only hand-written test kernels do).
  std::string instance;
  std::string regionKind; // the region's kind
  std::string source;     // a CUDA C++ translation unit; it may include the
                          // kernel library ("weft/*.cuh", KernelLibrary.h)
                          // and the toolkit's cuda_fp16.h / cuda_bf16.h
  std::array<int, 3> grid{1, 1, 1};
  std::array<int, 3> block{1, 1, 1};
  int sharedBytes = 0;
  std::vector<ParamBinding> params;
  // Programmatic dependent launch (griddepcontrol, sm_90 and newer): every
  // entry first waits for the previous kernel to finish before it touches
  // memory (common.cuh's wf_grid_dependency_enter), and the runtime stages
  // the next launch while this one runs. With releaseEarly (the source's
  // Config::RELEASE_EARLY), it also releases the next kernel at once, so
  // its blocks are resident and waiting when this one ends; otherwise they
  // start as this one's blocks exit. Set on split-K partial kernels and
  // 4-bit GEMVs, and with EmitOptions::fourBitProjections on every kernel
  // of a one-token RoPE region and the decode attention kernels of one
  // token (measured on an H200: resident waiting blocks slow 16-bit and
  // 8-bit projections down, but a 4-bit layer's short kernels gain from
  // starting without a gap; see docs/benchmarks.md).
  bool releaseEarly = false;
  // Every block must be resident at once (a persistent kernel whose blocks
  // wait on each other): the runtime launches it cooperatively.
  bool cooperative = false;
};

const char *elementTypeName(ElementType type); // "f16", "bf16", "f32"
const char *cudaType(ElementType type);        // "__half", "__nv_bfloat16", "float"
int64_t bytesOf(ElementType type);
// The element type of `type` (or of its elements), if one of the three.
std::optional<ElementType> elementTypeOf(mlir::Type type);
// A float literal that reads back as the same float ("0.125f", "2.0f").
std::string floatLiteral(double v);

// out[m, n] = A[m, k] · B[n, k]ᵀ (+ bias[n]) (+ residual[m, n]), row-major,
// f32 accumulation, run by cuBLASLt: the large-M projections of prefill.
// `c` is the output (`residual`, when present, has cType and c's shape).
struct GemmStep {
  int64_t m = 0, n = 0, k = 0;
  ParamBinding a, b, c;
  std::optional<ParamBinding> bias, residual;
  ElementType aType = ElementType::BF16, bType = ElementType::BF16,
              cType = ElementType::BF16, biasType = ElementType::BF16;
};

// One step of a region: a generated kernel or a library GEMM. Steps of one
// region share its Scratch buffers (by index), e.g. the normalized
// activation between an RMSNorm kernel and the GEMM that reads it.
struct EmittedStep {
  std::optional<EmittedKernel> kernel;
  std::optional<GemmStep> gemm;
};

struct EmitOptions {
  int64_t blockTokens = 16;          // KV cache page size
  int64_t maxSequences = 1;          // rows of the block table
  int64_t maxBlocksPerSequence = 256;
  int64_t smCount = 132;             // for grid sizing (split-K, splits)
  int computeCapability = 90;        // the architecture code is emitted for
  // Projections of more tokens than this run through cuBLASLt instead of
  // the generated GEMV (at most kMaxGemvTokens, declared below).
  int64_t maxGemvTokens = 16;
  // The decoder's projections are 4-bit codes: at one token, the kernels
  // between its QKV and O projections (RoPE + KV write, decode attention)
  // release the next kernel early too (EmittedKernel::releaseEarly).
  bool fourBitProjections = false;
  // A step of more rows than maxSequences (a prefill chunk) computes its LM
  // head and token selection on the rows that end a sequence's run only
  // (weft/sampled_rows.cuh): the rows the runtime reads. weft-compile sets
  // it unless --logits-rows=all (a 512-token chunk of Llama 3.1 8B fp16
  // took 0.94 of the all-rows step on an H200, benchmarks.md).
  bool sampledRowsLogits = false;
  // Consumer warps of the decode stream kernel's blocks: 0 lets the
  // emitter choose (8); 8 or 16 for A/B runs (weft-compile
  // --decode-stream-warps).
  int decodeStreamWarps = 0;
};

// Whether some weight of `module` holds 4-bit codes (what sets
// EmitOptions::fourBitProjections).
bool hasFourBitProjections(mlir::ModuleOp module);

// The steps that run `region` (a weft.fusion whose token dimension is
// static, i.e. after weft-specialize), in order. Fails with a message naming
// the region kind when the kind or a shape is unsupported. Deterministic:
// the same region and options give the same sources.
llvm::Expected<std::vector<EmittedStep>> emitRegion(FusionOp region,
                                                   const EmitOptions &options);

// The kernel of an all-reduce without NCCL: `dst[i] += src[i]` over `count`
// elements of `type`, f32 arithmetic. Its two parameters (dst, src) are
// bound by the all-reduce step, not by a region; it loops grid-stride, so
// any grid of kAccumulateBlock-thread blocks covers the whole vector.
inline constexpr int kAccumulateBlock = 256;
EmittedKernel emitAccumulateKernel(ElementType type, int64_t count);

// One persistent kernel for a whole decode step of one token (sm_90,
// weft/decode_stream.cuh): `regions` are the layers' regions in order, five
// a layer (rms_norm_linear_rope_kv_write, attention, linear_residual,
// rms_norm_linear_swiglu, linear_residual). Returns a kernel that zeroes
// the stream's counters and the stream kernel (cooperative), whose
// parameters bind inputs and results of `regions` (ParamBinding::region),
// or nothing with `why` set when these regions are not the pattern the
// kernel runs (a bias, quantized weights, a sliding window, soft caps,
// head_dim other than 128, more than 4 query heads per KV head, widths
// not multiples of 64, another architecture).
llvm::Expected<std::vector<EmittedStep>> emitDecodeStream(llvm::ArrayRef<FusionOp> regions,
                                                          const EmitOptions &options,
                                                          std::string &why);
// Region kinds of one layer, in the order emitDecodeStream takes them.
inline constexpr const char *kDecodeStreamLayerKinds[] = {
    "rms_norm_linear_rope_kv_write", "attention", "linear_residual", "rms_norm_linear_swiglu",
    "linear_residual"};

// Token counts above this run projections through cuBLASLt instead of a
// generated GEMV-style kernel.
inline constexpr int64_t kMaxGemvTokens = 16;
// Quantized projections of more tokens than this expand their codes to a
// 16-bit scratch matrix for cuBLASLt (fewer run in the GEMV's tensor-core
// engine, in tiles). partition::kExpandedCodesAbove prices that scratch.
// Measured on an H200, Llama 3.1 8B at 64 tokens a step: the engine 12.7
// (AWQ int4), 21.7 (GPTQ int8) and 17.6 ms (FP8), expanding 11.6, 13.3 and
// 13.3 ms; at 32 tokens the engine is faster (docs/benchmarks.md).
inline constexpr int64_t kMaxCodeGemvTokens = 32;
// A quantized LM head runs in the GEMV's tiles up to this many rows (two
// tiles), without expanding its codes.
inline constexpr int64_t kMaxHeadTileTokens = 2 * kMaxCodeGemvTokens;

} // namespace weft::cuda

#endif // WEFT_TARGETS_CUDA_KERNELEMITTER_H_

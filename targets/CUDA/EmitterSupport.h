// What the kernel emitters of targets/CUDA share inside the compiler: the
// analysis of a projection region (its prologue, epilogue and weight
// format, KernelEmitter.cpp) and the helpers that turn a source into an
// EmittedKernel. The per-region emitter (KernelEmitter.cpp) and the decode
// stream emitter (DecodeStreamEmitter.cpp) use them; nothing outside
// targets/CUDA includes this header.
#ifndef WEFT_TARGETS_CUDA_EMITTERSUPPORT_H_
#define WEFT_TARGETS_CUDA_EMITTERSUPPORT_H_

#include "targets/CUDA/KernelEmitter.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

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

} // namespace weft::cuda::detail

#endif // WEFT_TARGETS_CUDA_EMITTERSUPPORT_H_

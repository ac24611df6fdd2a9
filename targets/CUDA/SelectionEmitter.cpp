// Token selection over f32 logits rows: argmax, soft cap and sampling
// kernels of weft/sample.cuh and weft/softcap.cuh.
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

} // namespace weft::cuda::detail

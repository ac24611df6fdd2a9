// Bytes and FLOPs of each fusion region: the figures the cost model and the
// `weft-compile --emit=fused` report use.
#ifndef WEFT_COMPILER_ANALYSIS_REGIONCOST_H_
#define WEFT_COMPILER_ANALYSIS_REGIONCOST_H_

#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class raw_ostream;
}

namespace weft {

struct CostContext {
  // Cached positions each token attends over (bounded by a sliding window).
  int64_t contextLength = 4096;
};

struct RegionCost {
  std::string kind;
  std::vector<std::string> ops; // op names inside, in order
  int64_t tokens = 0;           // token count of the region (1 if dynamic)
  int64_t layer = -1;           // decoder layer, -1 for embedding and head
  uint64_t weightBytes = 0;     // weights read as stored (once per step, whatever T)
  // The same weights split by kind, for other weight formats: elements of
  // matrices (gathered rows only, for an embedding), their rows, and bytes
  // of vectors (norm weights, biases).
  uint64_t matrixElements = 0;
  uint64_t matrixRows = 0;
  uint64_t vectorBytes = 0;
  uint64_t activationBytesRead = 0;
  uint64_t kvBytesRead = 0;
  uint64_t bytesWritten = 0;    // activations and KV cache written
  double flops = 0;             // for all `tokens` tokens
  // Attention terms per cached position (so callers can vary the context):
  uint64_t kvBytesPerPosition = 0; // for all `tokens`
  double attentionFlopsPerPosition = 0;
  int64_t slidingWindow = 0;    // 0: none

  uint64_t bytesRead() const {
    return weightBytes + activationBytesRead + kvBytesRead;
  }
  double flopsPerToken() const { return tokens ? flops / double(tokens) : 0; }
};

// Cost of one region at its (specialized) token count.
RegionCost estimateRegionCost(FusionOp region, const CostContext &context);

// The `--emit=fused` report: one line per region of the first decode
// function (kind, ops, bytes read and written, FLOPs per token), then
// totals for every function of the module.
void printFusionReport(mlir::ModuleOp module, const CostContext &context,
                       llvm::raw_ostream &os);

} // namespace weft

#endif // WEFT_COMPILER_ANALYSIS_REGIONCOST_H_

// The interfaces weft ops implement for the analyses (WeftInterfaces.td).
#ifndef WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_H_
#define WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_H_

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <string>

namespace weft {

// What one op costs for a token count (CostOpInterface). Attention's terms
// per cached position multiply the context the caller assumes, bounded by
// the window.
struct OpCost {
  double flops = 0;
  uint64_t cacheBytesWritten = 0;
  uint64_t cacheBytesPerPosition = 0; // read for each attended position
  double flopsPerPosition = 0;
  int64_t slidingWindow = 0; // 0: none
  int64_t layer = -1;        // the decoder layer the op belongs to, if it names one
};

} // namespace weft

#include "dialects/Weft/IR/WeftInterfaces.h.inc"

#endif // WEFT_DIALECT_WEFT_IR_WEFTINTERFACES_H_

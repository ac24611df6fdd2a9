// The compile-time dimensions a kernel region depends on, as recorded in a
// fusion region's `dims` attribute by weft-specialize.
#ifndef WEFT_COMPILER_ANALYSIS_REGIONDIMS_H_
#define WEFT_COMPILER_ANALYSIS_REGIONDIMS_H_

#include "dialects/Weft/IR/WeftOps.h"

namespace weft {

// Token count, widths, heads, layer and window of the ops in `region`'s
// body (static shapes expected), e.g. {tokens = 1, hidden = 4096, k = 4096,
// n = 6144}. A name used twice with different values gets a suffix ("n_2").
mlir::DictionaryAttr computeRegionDims(FusionOp region, int64_t tokens);

} // namespace weft

#endif // WEFT_COMPILER_ANALYSIS_REGIONDIMS_H_

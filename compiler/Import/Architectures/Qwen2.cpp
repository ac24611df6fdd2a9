// Qwen2 and Qwen2.5 (Qwen2ForCausalLM): the Llama layer with biases on the
// Q, K and V projections (always, and on nothing else). Sliding-window
// attention on some layers (`use_sliding_window`) is refused.
#include "compiler/Import/Architecture.h"

namespace weft {
namespace {

llvm::Error readQwen2Fields(const JsonFields &r, ModelConfig &c) {
  if (llvm::Error e = layers::requireSilu(r, c))
    return e;
  c.qkvBias = true;
  c.oBias = c.mlpBias = false;
  WEFT_ASSIGN_OR_RETURN(useWindow, r.optBool("use_sliding_window"));
  if (useWindow.value_or(false))
    return r.error("use_sliding_window",
                   "Qwen2 sliding-window attention on some layers is not supported");
  return llvm::Error::success();
}

} // namespace

const Architecture &qwen2Architecture() {
  static const Architecture a{"Qwen2ForCausalLM", "qwen2", ModelFamily::Qwen2, readQwen2Fields,
                              layers::llamaLayer};
  return a;
}

} // namespace weft

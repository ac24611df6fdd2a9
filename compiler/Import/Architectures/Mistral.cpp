// Mistral (MistralForCausalLM): the Llama layer with sliding-window
// attention when `sliding_window` is shorter than the model's context.
#include "compiler/Import/Architecture.h"

namespace weft {
namespace {

llvm::Error readMistralFields(const JsonFields &r, ModelConfig &c) {
  if (llvm::Error e = layers::requireSilu(r, c))
    return e;
  if (llvm::Error e = layers::readProjectionBiases(r, c))
    return e;
  WEFT_ASSIGN_OR_RETURN(window, r.optInt("sliding_window", 1, int64_t(1) << 30));
  if (window && *window < c.maxPositionEmbeddings)
    c.slidingWindow = *window;
  return llvm::Error::success();
}

} // namespace

const Architecture &mistralArchitecture() {
  static const Architecture a{"MistralForCausalLM", "mistral", ModelFamily::Mistral,
                              readMistralFields, layers::llamaLayer};
  return a;
}

} // namespace weft

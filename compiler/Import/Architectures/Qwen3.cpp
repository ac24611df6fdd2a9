// Qwen3 dense models (Qwen3ForCausalLM): the Llama layer with an RMSNorm of
// each query and key head before the rotary embedding (q_norm, k_norm), an
// explicit head_dim (Qwen3-32B's 64 heads of 128 make queries 8192 wide
// over a hidden size of 5120) and, unlike Qwen2, no Q/K/V biases unless
// `attention_bias` says so. Sliding-window attention (`use_sliding_window`)
// is refused.
#include "compiler/Import/Architecture.h"

namespace weft {
namespace {

llvm::Error readQwen3Fields(const JsonFields &r, ModelConfig &c) {
  if (llvm::Error e = layers::requireSilu(r, c))
    return e;
  if (llvm::Error e = layers::readProjectionBiases(r, c))
    return e;
  WEFT_ASSIGN_OR_RETURN(useWindow, r.optBool("use_sliding_window"));
  if (useWindow.value_or(false))
    return r.error("use_sliding_window",
                   "Qwen3 sliding-window attention on some layers is not supported");
  return llvm::Error::success();
}

GraphValue qwen3Layer(ModelGraphBuilder &g, const ModelConfig &c, int64_t layer, GraphValue x) {
  layers::LlamaLayerParts parts;
  parts.headNorms = true;
  return layers::llamaLayer(g, c, layer, x, parts);
}

} // namespace

const Architecture &qwen3Architecture() {
  static const Architecture a{"Qwen3ForCausalLM", "qwen3", ModelFamily::Qwen3, readQwen3Fields,
                              qwen3Layer};
  return a;
}

} // namespace weft

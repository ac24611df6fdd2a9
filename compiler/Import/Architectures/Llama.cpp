// Llama (LlamaForCausalLM): Llama 2, 3, 3.1, 3.2 and their fine-tunes.
// Pre-norm attention with grouped KV heads and RoPE (default, linear or
// llama3 scaling, read by the common parser), a SwiGLU MLP, optional
// biases (`attention_bias` on Q/K/V/O, `mlp_bias` on the MLP).
#include "compiler/Import/Architecture.h"

namespace weft {
namespace {

llvm::Error readLlamaFields(const JsonFields &r, ModelConfig &c) {
  WEFT_ASSIGN_OR_RETURN(attentionBias, r.optBool("attention_bias"));
  WEFT_ASSIGN_OR_RETURN(mlpBias, r.optBool("mlp_bias"));
  c.qkvBias = c.oBias = attentionBias.value_or(false);
  c.mlpBias = mlpBias.value_or(false);
  return llvm::Error::success();
}

} // namespace

const Architecture &llamaArchitecture() {
  static const Architecture a{"LlamaForCausalLM", "llama", ModelFamily::Llama, readLlamaFields,
                              layers::llamaLayer};
  return a;
}

} // namespace weft

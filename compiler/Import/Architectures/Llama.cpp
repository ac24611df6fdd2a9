// Llama (LlamaForCausalLM): Llama 2, 3, 3.1, 3.2 and their fine-tunes.
// Pre-norm attention with grouped KV heads and RoPE (default, linear or
// llama3 scaling, read by the common parser), a SwiGLU MLP, optional
// biases (`attention_bias` on Q/K/V/O, `mlp_bias` on the MLP).
#include "compiler/Import/Architecture.h"

namespace weft {
namespace {

llvm::Error readLlamaFields(const JsonFields &r, ModelConfig &c) {
  if (llvm::Error e = layers::requireSilu(r, c))
    return e;
  return layers::readProjectionBiases(r, c);
}

} // namespace

const Architecture &llamaArchitecture() {
  static const Architecture a{"LlamaForCausalLM", "llama", ModelFamily::Llama, readLlamaFields,
                              layers::llamaLayer};
  return a;
}

} // namespace weft

// The model families Weft imports, one file each under Architectures/:
// what a Hugging Face `architectures` name means (its config.json fields
// beyond the common ones, and its decoder layer written against a small
// graph-building interface). The importer runs the layer against weft ops
// (Importer.cpp); expectedTensors runs it against a recorder of weights, so
// the checkpoint a family needs and the graph it builds cannot disagree.
// docs/adding-a-model.md walks through adding one.
#ifndef WEFT_COMPILER_IMPORT_ARCHITECTURE_H_
#define WEFT_COMPILER_IMPORT_ARCHITECTURE_H_

#include "compiler/Import/ModelConfig.h"
#include "compiler/Support/JsonFields.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>

namespace weft {

// A value of the graph under construction: [tokens, width] activations or a
// weight, opaque to the families.
struct GraphValue {
  int id = -1;
};

// What a decoder layer is made of. Activations have a dynamic token count;
// positions, slots and the KV cache are the graph's own.
class ModelGraphBuilder {
public:
  virtual ~ModelGraphBuilder() = default;
  // The decoder layer being built (-1 outside the layers): buildDecoder
  // sets it, and weights record it, so that nothing downstream needs to
  // read a layer index out of a tensor name.
  int64_t currentLayer = -1;
  // The checkpoint tensor `name` of `shape`, in the model's dtype.
  virtual GraphValue weight(const std::string &name, llvm::ArrayRef<int64_t> shape) = 0;
  // x [T, in] times w [out, in] transposed, plus bias [out].
  virtual GraphValue linear(GraphValue x, GraphValue w, std::optional<GraphValue> bias,
                            int64_t out) = 0;
  // RMSNorm over the last dimension with weight w and epsilon `eps` (times
  // (offset + w) for the config's normWeightOffset).
  virtual GraphValue rmsNorm(GraphValue x, GraphValue w, double eps) = 0;
  // RMSNorm of each head of x (the config's head_dim) with the one weight
  // w [head_dim] all heads share.
  virtual GraphValue headRmsNorm(GraphValue x, GraphValue w, double eps) = 0;
  // Rotary embedding of every head of x at the tokens' positions (the
  // config's head_dim, theta and scaling).
  virtual GraphValue rope(GraphValue x) = 0;
  // Writes this layer's K and V rows into the cache.
  virtual void kvWrite(GraphValue k, GraphValue v, int64_t layer) = 0;
  // Causal attention of q over the layer's cache (the config's heads, KV
  // heads, head_dim, attention scale and soft cap, and the layer's
  // sliding window).
  virtual GraphValue attention(GraphValue q, int64_t layer) = 0;
  virtual GraphValue add(GraphValue a, GraphValue b) = 0;
  virtual GraphValue mul(GraphValue a, GraphValue b) = 0;
  virtual GraphValue silu(GraphValue x) = 0;
  // GELU with the tanh approximation (PyTorch's gelu(approximate="tanh")).
  virtual GraphValue geluTanh(GraphValue x) = 0;
  // The embedding rows of the tokens' ids (times sqrt(hidden) when the
  // config says so).
  virtual GraphValue embedding(GraphValue table) = 0;
};

struct Architecture {
  const char *name;      // config.json "architectures", e.g. "LlamaForCausalLM"
  const char *modelType; // config.json "model_type", e.g. "llama"
  ModelFamily family;
  // The family's own config.json fields (biases, windows, ...), read after
  // the common ones (dimensions, RoPE, tying, dtype, special tokens).
  llvm::Error (*readFields)(const JsonFields &fields, ModelConfig &config);
  // Decoder layer `layer`: the hidden state x in, the next one out.
  GraphValue (*layer)(ModelGraphBuilder &g, const ModelConfig &config, int64_t layer,
                      GraphValue x);
};

// Every supported family, in the order messages list them.
llvm::ArrayRef<const Architecture *> architectures();
// The family of a config.json "architectures" name, or nullptr.
const Architecture *findArchitecture(llvm::StringRef name);
// The family of a config: by its architecture name, else (configs built in
// code may name none) by its family.
const Architecture &architectureOf(const ModelConfig &config);
// "LlamaForCausalLM, MistralForCausalLM, ..." for messages.
std::string supportedArchitectureNames();

// The decoder around the family's layers: embedding, every layer, the final
// RMSNorm; returns the normalized hidden state and the LM head weight (the
// embedding table when tied).
struct DecoderOutputs {
  GraphValue hidden;
  GraphValue head;
};
DecoderOutputs buildDecoder(ModelGraphBuilder &g, const ModelConfig &config,
                            const Architecture &arch);

// Building blocks families share.
namespace layers {
// The `attention_bias` (Q, K, V, O) and `mlp_bias` (gate, up, down) flags
// of Llama-style configs.
llvm::Error readProjectionBiases(const JsonFields &fields, ModelConfig &config);
// Refuses an MLP activation other than SiLU (Llama-style families).
llvm::Error requireSilu(const JsonFields &fields, const ModelConfig &config);
// A projection with its weight (and bias) named `prefix`.weight/.bias.
GraphValue projection(ModelGraphBuilder &g, GraphValue x, const std::string &prefix,
                      int64_t out, int64_t in, bool bias);
// The pre-norm attention block and SwiGLU MLP of Llama, Mistral and Qwen2
// (biases as the config says), under the Hugging Face tensor names
// model.layers.<i>.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj}.
GraphValue llamaLayer(ModelGraphBuilder &g, const ModelConfig &config, int64_t layer,
                      GraphValue x);
// What other families add to that layer.
struct LlamaLayerParts {
  // RMSNorm of each query and key head before the rotary embedding, with
  // weights self_attn.q_norm and self_attn.k_norm [head_dim] (Qwen3).
  bool headNorms = false;
};
GraphValue llamaLayer(ModelGraphBuilder &g, const ModelConfig &config, int64_t layer,
                      GraphValue x, const LlamaLayerParts &parts);
} // namespace layers

// The families, one per file in Architectures/.
const Architecture &llamaArchitecture();
const Architecture &mistralArchitecture();
const Architecture &qwen2Architecture();
const Architecture &qwen3Architecture();
const Architecture &gemma2Architecture();

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_ARCHITECTURE_H_

// The shape-level description of a model: what the importer reads from a
// Hugging Face config.json (or a built-in entry) and everything after uses.
#ifndef WEFT_COMPILER_IMPORT_MODELCONFIG_H_
#define WEFT_COMPILER_IMPORT_MODELCONFIG_H_

#include "runtime/io/Safetensors.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft {

enum class ModelFamily { Llama, Mistral, Qwen2, Qwen3, Gemma2 };
const char *modelFamilyName(ModelFamily family);

// The MLP's gate activation (config.json "hidden_act", Gemma's
// "hidden_activation").
enum class Activation { Silu, GeluTanh };
const char *activationName(Activation act); // "silu", "gelu_pytorch_tanh"

enum class RopeType { Default, Linear, Llama3 };
const char *ropeTypeName(RopeType type);

struct RopeScaling {
  RopeType type = RopeType::Default;
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositionEmbeddings = 0;
};

// Weights a checkpoint stores quantized (config.json "quantization_config"):
// the projections as packed integers with per-group scales and zeros, every
// other tensor in the model's dtype. The formats, from their public
// descriptions:
// - AWQ, GEMM layout: `qweight` int32 [in, out / 8] (8 nibbles per word, in
//   the order 0, 2, 4, 6, 1, 3, 5, 7 of the 8 columns), `qzeros` int32
//   [in / group, out / 8] packed alike, `scales` f16 [in / group, out];
//   w = (q - zero) * scale.
// - GPTQ: `qweight` int32 [in * bits / 32, out] (packed along the input,
//   low bits first), `qzeros` int32 [in / group, out * bits / 32] (packed
//   along the output, each stored as zero - 1), `scales` f16
//   [in / group, out], `g_idx` int32 [in] (each input's group).
// - compressed-tensors, format pack-quantized, symmetric integer weights
//   (W4A16, W8A16): `weight_packed` int32 [out, in * bits / 32] (packed
//   along the input, low bits first, each value stored plus 2^(bits-1)),
//   `weight_scale` in the model's dtype (F16 or BF16) [out, in / group]
//   (one column for strategy "channel"); w = (q - 2^(bits-1)) * scale.
enum class QuantMethod { None, Awq, Gptq, CompressedTensors };
const char *quantMethodName(QuantMethod method); // "awq", "gptq", "compressed-tensors"

struct Quantization {
  QuantMethod method = QuantMethod::None;
  int bits = 16;
  int64_t groupSize = 0; // input features per scale; 0: the whole input (GPTQ -1)
  bool zeroPoint = true; // asymmetric: stored zeros (AWQ zero_point, GPTQ not sym)
  std::vector<std::string> unconverted; // AWQ modules_to_not_convert, compressed-tensors
                                        // ignore (name parts; "re:" entries are regexes)

  bool active() const { return method != QuantMethod::None; }
  // Whether the projection whose weight is `name` ("...mlp.down_proj.weight")
  // is stored quantized.
  bool quantizes(llvm::StringRef name) const;
  // "AWQ 4-bit, group 128" for messages.
  std::string describe() const;
};

struct ModelConfig {
  std::string name;         // directory or built-in name, for messages
  std::string architecture; // e.g. "LlamaForCausalLM"
  ModelFamily family = ModelFamily::Llama;
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;
  int64_t vocabSize = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  RopeScaling rope;
  bool tieWordEmbeddings = false;
  bool qkvBias = false; // bias on the Q, K and V projections
  bool oBias = false;   // bias on the output projection
  bool mlpBias = false; // bias on gate, up and down
  std::optional<int64_t> slidingWindow;
  // Layers that use slidingWindow (Gemma 2: every other one); empty: all.
  std::vector<bool> slidingLayers;
  Activation hiddenAct = Activation::Silu;
  // Gemma: norms scale by (1 + weight), the embedding rows are multiplied
  // by sqrt(hidden) (rounded to the dtype), the attention scale is
  // query_pre_attn_scalar^-1/2, and attention scores and final logits are
  // soft-capped (cap * tanh(x / cap)).
  double normWeightOffset = 0.0;
  bool scaleEmbedding = false;
  std::optional<double> attentionScale; // default 1/sqrt(head_dim)
  std::optional<double> attentionSoftcap;
  std::optional<double> finalLogitSoftcap;
  io::DType dtype = io::DType::BF16; // the checkpoint's weight dtype
  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds;
  Quantization quant; // how the checkpoint stores the projections

  int64_t qWidth() const { return numHeads * headDim; }
  // The sliding window of layer `layer`, if it has one.
  std::optional<int64_t> windowOf(int64_t layer) const {
    if (!slidingWindow || (!slidingLayers.empty() && !slidingLayers[size_t(layer)]))
      return std::nullopt;
    return slidingWindow;
  }
  int64_t kvWidth() const { return numKvHeads * headDim; }
};

// A tensor the model needs from its checkpoint, with its expected shape.
// `dtype` is set for tensors of a fixed type (the packed integers and
// scales of a quantized projection); the others share the model's float
// dtype.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<io::DType> dtype;
  int64_t layer = -1; // the decoder layer that reads it; -1: embedding, final norm, head
};

// The tensors a checkpoint of `config` must hold, in a stable order
// (embedding, layers in order, final norm, LM head unless tied): the
// weights its family's graph reads (Architecture.cpp).
std::vector<ExpectedTensor> expectedTensors(const ModelConfig &config);
// The weights as the graph reads them: for a quantized checkpoint, each
// projection once as its [out, in] matrix instead of its packed tensors
// (what memory accounting prices in the chosen weight format).
std::vector<ExpectedTensor> graphWeights(const ModelConfig &config);

// Parameters of the model's weights (before any quantized packing), and
// the bytes its checkpoint holds (packed projections as stored).
uint64_t parameterCount(const ModelConfig &config);
uint64_t checkpointBytes(const ModelConfig &config);

// Parses a config.json. Every error is one line that starts with
// `displayName` and names the field at fault.
llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef json,
                                             llvm::StringRef displayName);
llvm::Expected<ModelConfig> readModelConfig(llvm::StringRef path);

// Built-in configurations (shapes only, no weights): "llama-3.1-8b", ...
std::vector<std::string> builtinModelNames();
llvm::Expected<ModelConfig> getBuiltinModel(llvm::StringRef name);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_MODELCONFIG_H_

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

enum class ModelFamily { Llama, Mistral, Qwen2 };
const char *modelFamilyName(ModelFamily family);

enum class RopeType { Default, Linear, Llama3 };
const char *ropeTypeName(RopeType type);

struct RopeScaling {
  RopeType type = RopeType::Default;
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositionEmbeddings = 0;
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
  io::DType dtype = io::DType::BF16; // the checkpoint's weight dtype
  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds;

  int64_t qWidth() const { return numHeads * headDim; }
  int64_t kvWidth() const { return numKvHeads * headDim; }
};

// A tensor the model needs from its checkpoint, with its expected shape.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// The tensors a checkpoint of `config` must hold, in a stable order
// (embedding, layers in order, final norm, LM head unless tied): the
// weights its family's graph reads (Architecture.cpp).
std::vector<ExpectedTensor> expectedTensors(const ModelConfig &config);

// Parameter count and weight bytes in the checkpoint's dtype.
uint64_t parameterCount(const ModelConfig &config);

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

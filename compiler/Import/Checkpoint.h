// A Hugging Face checkpoint directory opened for import: its config and the
// headers of its safetensors files, checked against what the model needs.
#ifndef WEFT_COMPILER_IMPORT_CHECKPOINT_H_
#define WEFT_COMPILER_IMPORT_CHECKPOINT_H_

#include "compiler/Import/ModelConfig.h"

#include <map>
#include <optional>

namespace weft {

struct CheckpointTensor {
  size_t file = 0; // index into Checkpoint::files
  io::TensorInfo info;
};

struct Checkpoint {
  std::string dir;
  std::vector<io::SafetensorsHeader> files;
  std::map<std::string, CheckpointTensor> tensors;
  uint64_t weightBytes = 0; // bytes of the tensors the model uses
  size_t unusedTensors = 0; // tensors present but not needed
  bool sharded = false;
  Quantization quant; // how it stores the projections (the config's)
};

// Reads `dir`/config.json and the safetensors headers (never tensor data) of
// `dir`/model.safetensors or of every shard named by
// `dir`/model.safetensors.index.json, then checks that every tensor the
// model needs is there with the right shape and a supported, uniform dtype.
// On success `config.dtype` is the checkpoint's weight dtype.
llvm::Expected<Checkpoint> openCheckpoint(llvm::StringRef dir,
                                          ModelConfig &config);

// A model to compile: a built-in configuration or a checkpoint directory.
struct ModelSource {
  ModelConfig config;
  std::optional<Checkpoint> checkpoint;
};

// `spec` is "builtin:NAME" or a checkpoint directory.
llvm::Expected<ModelSource> loadModelSource(llvm::StringRef spec);

} // namespace weft

#endif // WEFT_COMPILER_IMPORT_CHECKPOINT_H_

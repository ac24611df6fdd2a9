// Opening Hugging Face checkpoint directories: config, shard index and
// safetensors headers, validated against the model's expected tensors.
#include "compiler/Import/Checkpoint.h"

#include "compiler/Support/Error.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using llvm::Expected;
using llvm::StringRef;

namespace weft {
namespace {

// Tensor names are untrusted: every message stays on one line.
llvm::Error makeError(const llvm::Twine &msg) { return makeOneLineError(msg); }

llvm::Error toError(const Status &status) {
  return makeError(status.message());
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string joinPath(StringRef dir, StringRef file) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, file);
  return std::string(p);
}

} // namespace

Expected<Checkpoint> openCheckpoint(StringRef dir, ModelConfig &config) {
  Checkpoint ckpt;
  ckpt.dir = dir.str();
  std::string indexPath = joinPath(dir, "model.safetensors.index.json");
  std::string singlePath = joinPath(dir, "model.safetensors");

  // Which files to read, and for a sharded checkpoint where each tensor is.
  std::vector<std::string> fileNames;
  std::optional<io::ShardIndex> index;
  if (llvm::sys::fs::exists(indexPath)) {
    StatusOr<io::ShardIndex> parsed = io::readShardIndex(indexPath);
    if (!parsed)
      return toError(parsed.status());
    index = std::move(parsed.value());
    fileNames = index->shardFiles();
    ckpt.sharded = true;
  } else if (llvm::sys::fs::exists(singlePath)) {
    fileNames.push_back("model.safetensors");
  } else {
    return makeError(llvm::Twine(dir) +
                     ": no model.safetensors or model.safetensors.index.json");
  }

  for (const std::string &name : fileNames) {
    StatusOr<io::SafetensorsHeader> header =
        io::readSafetensorsHeader(joinPath(dir, name));
    if (!header)
      return toError(header.status());
    size_t fileIndex = ckpt.files.size();
    for (const io::TensorInfo &t : header->tensors) {
      if (index) {
        auto it = index->weightMap.find(t.name);
        // A shard may hold tensors the index does not list; the index is
        // authoritative for where a listed tensor lives.
        if (it != index->weightMap.end() && it->second != name)
          continue;
      }
      auto [pos, inserted] =
          ckpt.tensors.emplace(t.name, CheckpointTensor{fileIndex, t});
      if (!inserted)
        return makeError(llvm::formatv(
            "{0}: tensor '{1}' is also in {2}", header->path, t.name,
            ckpt.files[pos->second.file].path));
    }
    ckpt.files.push_back(std::move(header.value()));
  }
  if (index) {
    for (const auto &[tensor, file] : index->weightMap)
      if (!ckpt.tensors.count(tensor))
        return makeError(llvm::formatv(
            "{0}: tensor '{1}' listed in model.safetensors.index.json is missing",
            joinPath(dir, file), tensor));
  }

  // Every expected tensor: present, right shape, one float dtype throughout.
  std::vector<ExpectedTensor> expected = expectedTensors(config);
  std::optional<io::DType> dtype;
  std::string dtypeFrom;
  for (const ExpectedTensor &e : expected) {
    auto it = ckpt.tensors.find(e.name);
    if (it == ckpt.tensors.end())
      return makeError(llvm::formatv(
          "{0}: tensor '{1}' is missing (expected shape {2} for {3}{4})", dir,
          e.name, shapeString(e.shape), config.architecture,
          e.dtype ? ", " + config.quant.describe() : std::string()));
    const io::TensorInfo &t = it->second.info;
    const std::string &file = ckpt.files[it->second.file].path;
    if (t.shape != e.shape)
      return makeError(llvm::formatv(
          "{0}: tensor '{1}': shape {2} does not match config.json (expected {3}{4})",
          file, e.name, shapeString(t.shape), shapeString(e.shape),
          e.dtype ? " for " + config.quant.describe() : std::string()));
    if (e.dtype) { // a packed integer or scale tensor of a quantized projection
      if (t.dtype != *e.dtype)
        return makeError(llvm::formatv("{0}: tensor '{1}': dtype {2}, expected {3} for {4}",
                                       file, e.name, io::dtypeName(t.dtype),
                                       io::dtypeName(*e.dtype), config.quant.describe()));
      ckpt.weightBytes += t.numBytes();
      continue;
    }
    if (t.dtype != io::DType::F16 && t.dtype != io::DType::BF16 &&
        t.dtype != io::DType::F32)
      return makeError(llvm::formatv(
          "{0}: tensor '{1}': dtype {2} is not supported (expected F16, BF16 or F32)",
          file, e.name, io::dtypeName(t.dtype)));
    if (!dtype) {
      dtype = t.dtype;
      dtypeFrom = e.name;
    } else if (*dtype != t.dtype) {
      return makeError(llvm::formatv(
          "{0}: tensor '{1}': dtype {2} differs from '{3}' ({4}); mixed weight "
          "dtypes are not supported",
          file, e.name, io::dtypeName(t.dtype), dtypeFrom,
          io::dtypeName(*dtype)));
    }
    ckpt.weightBytes += t.numBytes();
  }
  ckpt.unusedTensors = ckpt.tensors.size() - expected.size();
  if (config.tieWordEmbeddings && ckpt.tensors.count("lm_head.weight"))
    --ckpt.unusedTensors;
  config.dtype = *dtype;
  ckpt.quant = config.quant;
  return ckpt;
}

Expected<ModelSource> loadModelSource(StringRef spec) {
  ModelSource source;
  if (spec.consume_front("builtin:")) {
    Expected<ModelConfig> config = getBuiltinModel(spec);
    if (!config)
      return config.takeError();
    source.config = std::move(*config);
    return std::move(source);
  }
  if (!llvm::sys::fs::is_directory(spec))
    return makeError(llvm::Twine(spec) +
                     ": not a checkpoint directory (or use builtin:NAME)");
  Expected<ModelConfig> config = readModelConfig(joinPath(spec, "config.json"));
  if (!config)
    return config.takeError();
  source.config = std::move(*config);
  source.config.name = spec.str();
  Expected<Checkpoint> ckpt = openCheckpoint(spec, source.config);
  if (!ckpt)
    return ckpt.takeError();
  source.checkpoint = std::move(*ckpt);
  return std::move(source);
}

} // namespace weft

#include "compiler/Import/GgufTensors.h"

#include "runtime/io/GgufQuants.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace weft {

namespace {

llvm::Error fail(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what.str());
}

// The per-layer names: GGUF's after "blk.N.", Hugging Face's after
// "model.layers.N.".
const std::pair<const char *, const char *> kLayerNames[] = {
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

} // namespace

std::optional<std::string> huggingFaceName(llvm::StringRef name) {
  if (name == "token_embd.weight")
    return std::string("model.embed_tokens.weight");
  if (name == "output_norm.weight")
    return std::string("model.norm.weight");
  if (name == "output.weight")
    return std::string("lm_head.weight");
  if (!name.consume_front("blk."))
    return std::nullopt;
  auto [layer, rest] = name.split('.');
  unsigned index = 0;
  if (layer.empty() || layer.getAsInteger(10, index) || std::to_string(index) != layer)
    return std::nullopt;
  llvm::StringRef suffix;
  if (rest.ends_with(".weight"))
    suffix = ".weight";
  else if (rest.ends_with(".bias"))
    suffix = ".bias";
  else
    return std::nullopt;
  llvm::StringRef base = rest.drop_back(suffix.size());
  for (auto [gguf, hf] : kLayerNames)
    if (base == gguf)
      return "model.layers." + layer.str() + "." + hf + suffix.str();
  return std::nullopt;
}

std::vector<int64_t> huggingFaceShape(const io::GgufTensor &tensor) {
  return std::vector<int64_t>(tensor.dims.rbegin(), tensor.dims.rend());
}

int64_t permutedHeads(const ModelConfig &config, llvm::StringRef hfName) {
  if (config.family != ModelFamily::Llama)
    return 0;
  if (hfName.ends_with(".self_attn.q_proj.weight") || hfName.ends_with(".self_attn.q_proj.bias"))
    return config.numHeads;
  if (hfName.ends_with(".self_attn.k_proj.weight") || hfName.ends_with(".self_attn.k_proj.bias"))
    return config.numKvHeads;
  return 0;
}

void unpermuteRows(std::vector<float> &values, int64_t rows, int64_t cols, int64_t heads) {
  if (heads <= 0 || rows % heads || (rows / heads) % 2)
    return;
  const int64_t perHead = rows / heads, half = perHead / 2;
  std::vector<float> out(values.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const float *from = values.data() + (h * perHead + 2 * i + j) * cols;
        float *to = out.data() + (h * perHead + j * half + i) * cols;
        std::copy(from, from + cols, to);
      }
  values = std::move(out);
}

llvm::Expected<std::vector<float>> readAsHuggingFace(const io::GgufFile &file,
                                                     std::string_view bytes,
                                                     const io::GgufTensor &tensor,
                                                     const ModelConfig &config) {
  if (tensor.offset > bytes.size() || tensor.bytes > bytes.size() - tensor.offset)
    return fail(file.path + ": GGUF tensor '" + tensor.name + "' lies past the bytes given");
  std::optional<io::GgmlBlock> block = io::ggmlBlock(tensor.type);
  if (!block)
    return fail(file.path + ": GGUF tensor '" + tensor.name + "': unknown ggml type " +
                llvm::Twine(tensor.type));
  std::vector<float> values(size_t(tensor.numElements()));
  Status st = io::dequantizeGgml(tensor.type, bytes.data() + tensor.offset,
                                 tensor.numElements() / block->elements, values.data());
  if (!st.isOk())
    return fail(file.path + ": GGUF tensor '" + tensor.name + "': " + st.message());
  std::optional<std::string> hf = huggingFaceName(tensor.name);
  if (hf)
    if (int64_t heads = permutedHeads(config, *hf)) {
      const int64_t cols = int64_t(tensor.dims[0]);
      const int64_t rows = tensor.dims.size() > 1 ? int64_t(tensor.numElements()) / cols : cols;
      if (tensor.dims.size() == 1) // a bias: one value a row
        unpermuteRows(values, rows, 1, heads);
      else
        unpermuteRows(values, rows, cols, heads);
    }
  return values;
}

llvm::Error checkGgufTensors(const io::GgufFile &file, const ModelConfig &config) {
  std::map<std::string, const io::GgufTensor *> byHf;
  for (const io::GgufTensor &t : file.tensors)
    if (std::optional<std::string> hf = huggingFaceName(t.name))
      byHf[*hf] = &t;
  for (const ExpectedTensor &e : expectedTensors(config)) {
    auto it = byHf.find(e.name);
    if (it == byHf.end())
      return fail(file.path + ": GGUF has no tensor for " + e.name);
    std::vector<int64_t> shape = huggingFaceShape(*it->second);
    if (shape != e.shape)
      return fail(llvm::formatv("{0}: GGUF tensor '{1}' ({2}) has shape [{3}], expected [{4}]",
                                file.path, it->second->name, e.name,
                                llvm::join(llvm::map_range(shape,
                                                           [](int64_t d) {
                                                             return std::to_string(d);
                                                           }),
                                           ", "),
                                llvm::join(llvm::map_range(e.shape,
                                                           [](int64_t d) {
                                                             return std::to_string(d);
                                                           }),
                                           ", ")));
  }
  return llvm::Error::success();
}

} // namespace weft

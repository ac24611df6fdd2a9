// The registry of model families, the decoder around their layers, the
// layer they share, and the checkpoint tensors a config needs (recorded
// from the family's own graph).
#include "compiler/Import/Architecture.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>
#include <set>

namespace weft {

llvm::ArrayRef<const Architecture *> architectures() {
  static const Architecture *const all[] = {&llamaArchitecture(), &mistralArchitecture(),
                                            &qwen2Architecture(), &qwen3Architecture(),
                                            &gemma2Architecture()};
  return all;
}

const Architecture *findArchitecture(llvm::StringRef name) {
  for (const Architecture *a : architectures())
    if (name == a->name)
      return a;
  return nullptr;
}

const Architecture &architectureOf(const ModelConfig &c) {
  if (const Architecture *a = findArchitecture(c.architecture))
    return *a;
  for (const Architecture *a : architectures())
    if (a->family == c.family)
      return *a;
  return llamaArchitecture();
}

std::string supportedArchitectureNames() {
  std::vector<std::string> names;
  for (const Architecture *a : architectures())
    names.push_back(a->name);
  return llvm::join(names, ", ");
}

DecoderOutputs buildDecoder(ModelGraphBuilder &g, const ModelConfig &c,
                            const Architecture &arch) {
  GraphValue table = g.weight("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize});
  GraphValue x = g.embedding(table);
  for (int64_t i = 0; i < c.numLayers; ++i) {
    g.currentLayer = i;
    x = arch.layer(g, c, i, x);
  }
  g.currentLayer = -1;
  DecoderOutputs out;
  out.hidden = g.rmsNorm(x, g.weight("model.norm.weight", {c.hiddenSize}), c.rmsNormEps);
  out.head = c.tieWordEmbeddings ? table
                                 : g.weight("lm_head.weight", {c.vocabSize, c.hiddenSize});
  return out;
}

namespace layers {

llvm::Error readProjectionBiases(const JsonFields &r, ModelConfig &c) {
  WEFT_ASSIGN_OR_RETURN(attentionBias, r.optBool("attention_bias"));
  WEFT_ASSIGN_OR_RETURN(mlpBias, r.optBool("mlp_bias"));
  c.qkvBias = c.oBias = attentionBias.value_or(false);
  c.mlpBias = mlpBias.value_or(false);
  return llvm::Error::success();
}

llvm::Error requireSilu(const JsonFields &r, const ModelConfig &c) {
  if (c.hiddenAct != Activation::Silu)
    return r.error("hidden_act", std::string("'") + activationName(c.hiddenAct) + "' is not " +
                                     c.architecture + "'s activation (expected silu)");
  return llvm::Error::success();
}

GraphValue projection(ModelGraphBuilder &g, GraphValue x, const std::string &prefix,
                      int64_t out, int64_t in, bool bias) {
  GraphValue w = g.weight(prefix + ".weight", {out, in});
  std::optional<GraphValue> b;
  if (bias)
    b = g.weight(prefix + ".bias", {out});
  return g.linear(x, w, b, out);
}

GraphValue llamaLayer(ModelGraphBuilder &g, const ModelConfig &c, int64_t i, GraphValue x) {
  return llamaLayer(g, c, i, x, LlamaLayerParts{});
}

GraphValue llamaLayer(ModelGraphBuilder &g, const ModelConfig &c, int64_t i, GraphValue x,
                      const LlamaLayerParts &parts) {
  std::string p = "model.layers." + std::to_string(i) + ".";
  int64_t h = c.hiddenSize, f = c.intermediateSize;
  GraphValue n = g.rmsNorm(x, g.weight(p + "input_layernorm.weight", {h}), c.rmsNormEps);
  GraphValue q = projection(g, n, p + "self_attn.q_proj", c.qWidth(), h, c.qkvBias);
  GraphValue k = projection(g, n, p + "self_attn.k_proj", c.kvWidth(), h, c.qkvBias);
  GraphValue v = projection(g, n, p + "self_attn.v_proj", c.kvWidth(), h, c.qkvBias);
  if (parts.headNorms) {
    q = g.headRmsNorm(q, g.weight(p + "self_attn.q_norm.weight", {c.headDim}), c.rmsNormEps);
    k = g.headRmsNorm(k, g.weight(p + "self_attn.k_norm.weight", {c.headDim}), c.rmsNormEps);
  }
  GraphValue qr = g.rope(q);
  GraphValue kr = g.rope(k);
  g.kvWrite(kr, v, i);
  GraphValue a = g.attention(qr, i);
  GraphValue o = projection(g, a, p + "self_attn.o_proj", h, c.qWidth(), c.oBias);
  GraphValue x1 = g.add(x, o);
  GraphValue n2 =
      g.rmsNorm(x1, g.weight(p + "post_attention_layernorm.weight", {h}), c.rmsNormEps);
  GraphValue gate = projection(g, n2, p + "mlp.gate_proj", f, h, c.mlpBias);
  GraphValue up = projection(g, n2, p + "mlp.up_proj", f, h, c.mlpBias);
  GraphValue m = g.mul(g.silu(gate), up);
  GraphValue d = projection(g, m, p + "mlp.down_proj", h, f, c.mlpBias);
  return g.add(x1, d);
}

} // namespace layers

namespace {

// Runs a family's graph for its weights alone: every weight() call, in
// graph order, is a tensor the checkpoint must hold, or, for a quantized
// projection, the packed tensors that store it (ModelConfig.h).
class WeightRecorder : public ModelGraphBuilder {
public:
  WeightRecorder(const Quantization &quant, io::DType dtype) : quant(quant), dtype(dtype) {}
  std::vector<ExpectedTensor> tensors;

  GraphValue weight(const std::string &name, llvm::ArrayRef<int64_t> shape) override {
    if (!seen.insert(name).second)
      return {0}; // used twice (tied): listed once
    if (shape.size() != 2 || !quant.quantizes(name)) {
      tensors.push_back({name, std::vector<int64_t>(shape.begin(), shape.end()), {},
                         currentLayer});
      return {0};
    }
    std::string base = llvm::StringRef(name).drop_back(std::strlen("weight")).str();
    int64_t out = shape[0], in = shape[1], perWord = 32 / quant.bits;
    int64_t groups = quant.groupSize ? in / quant.groupSize : 1;
    if (quant.method == QuantMethod::CompressedTensors) {
      tensors.push_back({base + "weight_packed", {out, in / perWord}, io::DType::I32, currentLayer});
      tensors.push_back({base + "weight_scale", {out, groups}, dtype, currentLayer}); // the model's dtype
    } else if (quant.method == QuantMethod::Awq) {
      tensors.push_back({base + "qweight", {in, out / perWord}, io::DType::I32, currentLayer});
      tensors.push_back({base + "qzeros", {groups, out / perWord}, io::DType::I32, currentLayer});
      tensors.push_back({base + "scales", {groups, out}, io::DType::F16, currentLayer});
    } else {
      tensors.push_back({base + "qweight", {in / perWord, out}, io::DType::I32, currentLayer});
      tensors.push_back({base + "qzeros", {groups, out / perWord}, io::DType::I32, currentLayer});
      tensors.push_back({base + "scales", {groups, out}, io::DType::F16, currentLayer});
      tensors.push_back({base + "g_idx", {in}, io::DType::I32, currentLayer});
    }
    return {0};
  }
  GraphValue linear(GraphValue, GraphValue, std::optional<GraphValue>, int64_t) override {
    return {0};
  }
  GraphValue rmsNorm(GraphValue, GraphValue, double) override { return {0}; }
  GraphValue headRmsNorm(GraphValue, GraphValue, double) override { return {0}; }
  GraphValue rope(GraphValue) override { return {0}; }
  void kvWrite(GraphValue, GraphValue, int64_t) override {}
  GraphValue attention(GraphValue, int64_t) override { return {0}; }
  GraphValue add(GraphValue, GraphValue) override { return {0}; }
  GraphValue mul(GraphValue, GraphValue) override { return {0}; }
  GraphValue silu(GraphValue) override { return {0}; }
  GraphValue geluTanh(GraphValue) override { return {0}; }
  GraphValue embedding(GraphValue) override { return {0}; }

private:
  const Quantization &quant;
  io::DType dtype; // the model's
  std::set<std::string> seen;
};

} // namespace

std::vector<ExpectedTensor> expectedTensors(const ModelConfig &c) {
  WeightRecorder recorder(c.quant, c.dtype);
  buildDecoder(recorder, c, architectureOf(c));
  return std::move(recorder.tensors);
}

std::vector<ExpectedTensor> graphWeights(const ModelConfig &c) {
  Quantization none; // the weights as the graph reads them, before any packing
  WeightRecorder recorder(none, c.dtype);
  buildDecoder(recorder, c, architectureOf(c));
  return std::move(recorder.tensors);
}

namespace {
uint64_t elementsOf(const ExpectedTensor &t) {
  uint64_t e = 1;
  for (int64_t d : t.shape)
    e *= uint64_t(d);
  return e;
}
} // namespace

uint64_t parameterCount(const ModelConfig &c) {
  uint64_t n = 0;
  for (const ExpectedTensor &t : graphWeights(c))
    n += elementsOf(t);
  return n;
}

uint64_t checkpointBytes(const ModelConfig &c) {
  uint64_t bytes = 0;
  for (const ExpectedTensor &t : expectedTensors(c))
    bytes += elementsOf(t) * io::dtypeSize(t.dtype.value_or(c.dtype));
  return bytes;
}

} // namespace weft

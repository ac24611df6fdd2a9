// Gemma 2 (Gemma2ForCausalLM): a decoder with RMSNorms that scale by
// (1 + weight) on both sides of attention and of the MLP (input,
// post-attention, pre- and post-feedforward norms), a GELU-tanh gated MLP,
// embedding rows multiplied by sqrt(hidden_size), attention scaled by
// query_pre_attn_scalar^-1/2 with soft-capped scores, a sliding window on
// alternate layers (`layer_types`, or every even layer as transformers 4
// has it), soft-capped final logits and tied embeddings by default.
#include "compiler/Import/Architecture.h"

namespace weft {
namespace {

llvm::Error readGemma2Fields(const JsonFields &r, ModelConfig &c) {
  // transformers writes both; "hidden_activation" is the one Gemma reads.
  WEFT_ASSIGN_OR_RETURN(act, r.optString("hidden_activation"));
  std::string activation = act.value_or(activationName(c.hiddenAct));
  if (activation != "gelu_pytorch_tanh")
    return r.error(act ? "hidden_activation" : "hidden_act",
                   "unsupported activation '" + activation +
                       "' (Gemma 2 needs gelu_pytorch_tanh)");
  c.hiddenAct = Activation::GeluTanh;
  WEFT_ASSIGN_OR_RETURN(bias, r.optBool("attention_bias"));
  if (bias.value_or(false))
    return r.error("attention_bias", "Gemma 2 with attention biases is not supported");
  c.qkvBias = c.oBias = c.mlpBias = false;
  c.normWeightOffset = 1.0;
  c.scaleEmbedding = true;
  WEFT_ASSIGN_OR_RETURN(tie, r.optBool("tie_word_embeddings"));
  c.tieWordEmbeddings = tie.value_or(true);

  WEFT_ASSIGN_OR_RETURN(scalar, r.optPositive("query_pre_attn_scalar"));
  c.attentionScale = 1.0 / std::sqrt(scalar.value_or(256.0));
  WEFT_ASSIGN_OR_RETURN(attnCap, r.optPositive("attn_logit_softcapping"));
  WEFT_ASSIGN_OR_RETURN(finalCap, r.optPositive("final_logit_softcapping"));
  c.attentionSoftcap = attnCap;
  c.finalLogitSoftcap = finalCap;

  WEFT_ASSIGN_OR_RETURN(window, r.optInt("sliding_window", 1, int64_t(1) << 30));
  c.slidingWindow = window;
  c.slidingLayers.assign(size_t(c.numLayers), false);
  if (const llvm::json::Value *types = r.get("layer_types")) {
    const llvm::json::Array *list = types->getAsArray();
    if (!list || int64_t(list->size()) != c.numLayers)
      return r.error("layer_types", "expected a list of " + std::to_string(c.numLayers) +
                                        " layer types, got " + describeJson(*types));
    for (auto [i, v] : llvm::enumerate(*list)) {
      std::optional<llvm::StringRef> t = v.getAsString();
      if (!t || (*t != "sliding_attention" && *t != "full_attention"))
        return r.error("layer_types", "entry " + std::to_string(i) +
                                          ": expected \"sliding_attention\" or "
                                          "\"full_attention\", got " + describeJson(v));
      c.slidingLayers[i] = *t == "sliding_attention";
    }
  } else {
    for (int64_t i = 0; i < c.numLayers; i += 2)
      c.slidingLayers[size_t(i)] = true;
  }
  bool anySliding = llvm::is_contained(c.slidingLayers, true);
  if (anySliding && !window)
    return r.error("sliding_window", "missing (layer_types has sliding layers)");
  if (!anySliding)
    c.slidingWindow.reset();
  return llvm::Error::success();
}

GraphValue gemma2Layer(ModelGraphBuilder &g, const ModelConfig &c, int64_t i, GraphValue x) {
  std::string p = "model.layers." + std::to_string(i) + ".";
  int64_t h = c.hiddenSize, f = c.intermediateSize;
  auto norm = [&](GraphValue v, const char *name) {
    return g.rmsNorm(v, g.weight(p + name + ".weight", {h}), c.rmsNormEps);
  };
  GraphValue n = norm(x, "input_layernorm");
  GraphValue q = layers::projection(g, n, p + "self_attn.q_proj", c.qWidth(), h, false);
  GraphValue k = layers::projection(g, n, p + "self_attn.k_proj", c.kvWidth(), h, false);
  GraphValue v = layers::projection(g, n, p + "self_attn.v_proj", c.kvWidth(), h, false);
  GraphValue qr = g.rope(q);
  GraphValue kr = g.rope(k);
  g.kvWrite(kr, v, i);
  GraphValue a = g.attention(qr, i);
  GraphValue o = layers::projection(g, a, p + "self_attn.o_proj", h, c.qWidth(), false);
  GraphValue x1 = g.add(x, norm(o, "post_attention_layernorm"));
  GraphValue n2 = norm(x1, "pre_feedforward_layernorm");
  GraphValue gate = layers::projection(g, n2, p + "mlp.gate_proj", f, h, false);
  GraphValue up = layers::projection(g, n2, p + "mlp.up_proj", f, h, false);
  GraphValue m = g.mul(g.geluTanh(gate), up);
  GraphValue d = layers::projection(g, m, p + "mlp.down_proj", h, f, false);
  return g.add(x1, norm(d, "post_feedforward_layernorm"));
}

} // namespace

const Architecture &gemma2Architecture() {
  static const Architecture a{"Gemma2ForCausalLM", "gemma2", ModelFamily::Gemma2,
                              readGemma2Fields, gemma2Layer};
  return a;
}

} // namespace weft

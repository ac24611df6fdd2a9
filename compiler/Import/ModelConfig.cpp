// Parsing of Hugging Face config.json files into ModelConfig: the fields
// every family shares here, the family's own in Architectures/.
#include "compiler/Import/ModelConfig.h"

#include "compiler/Import/Architecture.h"
#include "compiler/Support/JsonFields.h"
#include "runtime/io/ReadFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
namespace json = llvm::json;

namespace weft {

const char *modelFamilyName(ModelFamily family) {
  switch (family) {
  case ModelFamily::Llama: return "llama";
  case ModelFamily::Mistral: return "mistral";
  case ModelFamily::Qwen2: return "qwen2";
  case ModelFamily::Qwen3: return "qwen3";
  case ModelFamily::Gemma2: return "gemma2";
  }
  return "unknown";
}

const char *quantMethodName(QuantMethod method) {
  switch (method) {
  case QuantMethod::None: return "none";
  case QuantMethod::Awq: return "awq";
  case QuantMethod::Gptq: return "gptq";
  case QuantMethod::CompressedTensors: return "compressed-tensors";
  }
  return "unknown";
}

bool Quantization::quantizes(StringRef name) const {
  if (!active() || !name.ends_with("_proj.weight"))
    return false;
  StringRef module = name.drop_back(std::strlen(".weight"));
  for (const std::string &u : unconverted) {
    StringRef entry(u);
    if (entry.consume_front("re:") ? llvm::Regex(entry).match(module) : name.contains(u))
      return false;
  }
  return true;
}

std::string Quantization::describe() const {
  if (!active())
    return "unquantized";
  std::string s = (method == QuantMethod::Awq    ? "AWQ "
                   : method == QuantMethod::Gptq ? "GPTQ "
                                                 : "compressed-tensors ") +
                  std::to_string(bits) + "-bit";
  s += groupSize ? ", group " + std::to_string(groupSize) : ", one group per row";
  if (method == QuantMethod::Gptq)
    s += zeroPoint ? ", asymmetric" : ", symmetric";
  return s;
}

const char *activationName(Activation act) {
  switch (act) {
  case Activation::Silu: return "silu";
  case Activation::GeluTanh: return "gelu_pytorch_tanh";
  }
  return "unknown";
}

const char *ropeTypeName(RopeType type) {
  switch (type) {
  case RopeType::Default: return "default";
  case RopeType::Linear: return "linear";
  case RopeType::Llama3: return "llama3";
  }
  return "unknown";
}

namespace {

// Config values are untrusted: every message stays on one line.
Error makeError(const llvm::Twine &msg) { return makeOneLineError(msg); }

std::string describe(const json::Value &v) { return describeJson(v); }

using FieldReader = JsonFields;

constexpr int64_t kMaxDim = int64_t(1) << 24;

Expected<RopeScaling> parseRopeScaling(const json::Object &obj, StringRef file,
                                       StringRef fieldName) {
  FieldReader r(obj, file, (fieldName + ".").str());
  RopeScaling rope;
  // transformers < 4.45 spelled the key "type"; later versions "rope_type".
  WEFT_ASSIGN_OR_RETURN(typeName, r.optString("rope_type"));
  StringRef typeField = "rope_type";
  if (!typeName) {
    WEFT_ASSIGN_OR_RETURN(legacy, r.optString("type"));
    typeName = legacy;
    typeField = "type";
  }
  std::string type = typeName.value_or("default");
  if (type == "default") {
    rope.type = RopeType::Default;
    return rope;
  }
  if (type == "linear") {
    rope.type = RopeType::Linear;
    WEFT_ASSIGN_OR_RETURN(factor, r.optPositive("factor"));
    if (!factor)
      return r.error("factor", "missing (required by rope_type 'linear')");
    rope.factor = *factor;
    return rope;
  }
  if (type == "llama3") {
    rope.type = RopeType::Llama3;
    WEFT_ASSIGN_OR_RETURN(factor, r.optPositive("factor"));
    WEFT_ASSIGN_OR_RETURN(low, r.optPositive("low_freq_factor"));
    WEFT_ASSIGN_OR_RETURN(high, r.optPositive("high_freq_factor"));
    WEFT_ASSIGN_OR_RETURN(orig, r.optInt("original_max_position_embeddings", 1,
                                         kMaxDim * 64));
    if (!factor)
      return r.error("factor", "missing (required by rope_type 'llama3')");
    if (!low)
      return r.error("low_freq_factor", "missing (required by rope_type 'llama3')");
    if (!high)
      return r.error("high_freq_factor", "missing (required by rope_type 'llama3')");
    if (!orig)
      return r.error("original_max_position_embeddings",
                     "missing (required by rope_type 'llama3')");
    if (*high <= *low)
      return r.error("high_freq_factor",
                     llvm::formatv("expected more than low_freq_factor ({0}), got {1}",
                                   *low, *high));
    rope.factor = *factor;
    rope.lowFreqFactor = *low;
    rope.highFreqFactor = *high;
    rope.originalMaxPositionEmbeddings = *orig;
    return rope;
  }
  return r.error(typeField, "unsupported rope scaling '" + type +
                                "' (supported: default, linear, llama3)");
}

// A list of module names (AWQ's modules_to_not_convert, compressed-tensors'
// ignore) into q.unconverted; a "re:" regex must compile.
Error readModuleList(const FieldReader &r, StringRef field, Quantization &q) {
  const json::Value *skip = r.get(field);
  if (!skip)
    return Error::success();
  const json::Array *list = skip->getAsArray();
  if (!list)
    return r.error(field, "expected a list of module names or null, got " + describe(*skip));
  for (const json::Value &e : *list) {
    std::optional<StringRef> name = e.getAsString();
    if (!name || name->empty())
      return r.error(field, "expected module names, got " + describe(e));
    std::string why;
    StringRef pattern = *name;
    if (pattern.consume_front("re:") && !llvm::Regex(pattern).isValid(why))
      return r.error(field, "'" + name->str() + "' is not a valid regular expression: " + why);
    q.unconverted.push_back(name->str());
  }
  return Error::success();
}

// compressed-tensors (llm-compressor): one scheme of symmetric integer
// weights, packed (W4A16, W8A16). Anything else is refused with its field.
Expected<Quantization> parseCompressedTensors(const FieldReader &r) {
  Quantization q;
  q.method = QuantMethod::CompressedTensors;
  q.zeroPoint = false;
  WEFT_ASSIGN_OR_RETURN(format, r.optString("format"));
  if (!format)
    return r.error("format", "missing (expected pack-quantized)");
  if (*format != "pack-quantized")
    return r.error("format", "'" + *format + "' is not supported (pack-quantized: W4A16 and "
                                             "W8A16 integer weights)");
  WEFT_ASSIGN_OR_RETURN(groups, r.optObject("config_groups"));
  if (!groups || groups->object().size() != 1)
    return r.error("config_groups",
                   groups ? llvm::formatv("{0} schemes; one scheme for every Linear layer is "
                                          "supported",
                                          groups->object().size())
                                .str()
                          : std::string("missing (expected one scheme of weights)"));
  WEFT_ASSIGN_OR_RETURN(scheme, groups->optObject(groups->object().begin()->first));
  if (!scheme)
    return groups->error(groups->object().begin()->first, "missing");
  if (const json::Value *targets = scheme->get("targets")) {
    const json::Array *list = targets->getAsArray();
    if (!list || !llvm::any_of(*list, [](const json::Value &t) {
          return t.getAsString() && *t.getAsString() == "Linear";
        }))
      return scheme->error("targets", "expected a list that holds \"Linear\", got " +
                                          describe(*targets));
  }
  if (scheme->get("input_activations"))
    return scheme->error("input_activations",
                         "quantized activations (W8A8, W4A8) are not supported: weights "
                         "only (W4A16, W8A16)");
  WEFT_ASSIGN_OR_RETURN(weights, scheme->optObject("weights"));
  if (!weights)
    return scheme->error("weights", "missing (expected num_bits, type, symmetric, strategy)");
  WEFT_ASSIGN_OR_RETURN(bits, weights->optInt("num_bits", 1, 64));
  if (!bits)
    return weights->error("num_bits", "missing (expected 4 or 8)");
  if (*bits != 4 && *bits != 8)
    return weights->error("num_bits", llvm::formatv("{0} bits are not supported (4 or 8)", *bits));
  q.bits = int(*bits);
  WEFT_ASSIGN_OR_RETURN(type, weights->optString("type"));
  if (type.value_or("int") != "int")
    return weights->error("type", "'" + *type + "' is not supported (int; FP8 comes from "
                                                "--weight-dtype fp8 on a 16-bit checkpoint)");
  WEFT_ASSIGN_OR_RETURN(symmetric, weights->optBool("symmetric"));
  if (!symmetric.value_or(true))
    return weights->error("symmetric", "asymmetric weights (zero points) are not supported");
  WEFT_ASSIGN_OR_RETURN(dynamic, weights->optBool("dynamic"));
  if (dynamic.value_or(false))
    return weights->error("dynamic", "dynamic weight scales are not supported");
  if (const json::Value *order = weights->get("actorder"))
    return weights->error("actorder", "act-order (" + describe(*order) +
                                          ") is not supported: quantize with actorder null");
  WEFT_ASSIGN_OR_RETURN(strategy, weights->optString("strategy"));
  if (!strategy)
    return weights->error("strategy", "missing (expected group or channel)");
  if (*strategy == "group") {
    WEFT_ASSIGN_OR_RETURN(group, weights->optInt("group_size", 1, kMaxDim));
    if (!group)
      return weights->error("group_size", "missing (expected the input features per scale)");
    q.groupSize = *group;
  } else if (*strategy != "channel") {
    return weights->error("strategy",
                          "'" + *strategy + "' is not supported (group, channel)");
  }
  if (r.get("kv_cache_scheme"))
    return r.error("kv_cache_scheme", "a quantized KV cache is not supported (the cache stays in "
                                      "the model's 16-bit dtype)");
  if (r.get("sparsity_config"))
    return r.error("sparsity_config", "sparse weights are not supported");
  if (Error e = readModuleList(r, "ignore", q))
    return std::move(e);
  return q;
}

// config.json "quantization_config" (see Quantization in ModelConfig.h).
// What the kernels cannot take is refused here, with the option named:
// nothing is silently run in another precision.
Expected<Quantization> parseQuantization(const json::Object &obj, StringRef file) {
  FieldReader r(obj, file, "quantization_config.");
  Quantization q;
  WEFT_ASSIGN_OR_RETURN(method, r.optString("quant_method"));
  if (!method)
    return r.error("quant_method", "missing (expected awq or gptq)");
  std::string m = llvm::StringRef(*method).lower();
  if (m == "awq") {
    q.method = QuantMethod::Awq;
    WEFT_ASSIGN_OR_RETURN(bits, r.optInt("bits", 1, 64));
    WEFT_ASSIGN_OR_RETURN(wBit, r.optInt("w_bit", 1, 64)); // AutoAWQ's own spelling
    q.bits = int(bits.value_or(wBit.value_or(4)));
    if (q.bits != 4)
      return r.error(bits ? "bits" : "w_bit",
                     llvm::formatv("AWQ with {0} bits is not supported (4)", q.bits));
    WEFT_ASSIGN_OR_RETURN(group, r.optInt("group_size", 1, kMaxDim));
    WEFT_ASSIGN_OR_RETURN(qGroup, r.optInt("q_group_size", 1, kMaxDim));
    if (!group && !qGroup)
      return r.error("group_size", "missing (expected the input features per scale, e.g. 128)");
    q.groupSize = group.value_or(qGroup.value_or(0));
    WEFT_ASSIGN_OR_RETURN(zeroPoint, r.optBool("zero_point"));
    q.zeroPoint = zeroPoint.value_or(true);
    if (!q.zeroPoint)
      return r.error("zero_point", "symmetric AWQ (zero_point false) is not supported");
    WEFT_ASSIGN_OR_RETURN(version, r.optString("version"));
    std::string v = llvm::StringRef(version.value_or("gemm")).lower();
    if (v != "gemm")
      return r.error("version", "'" + *version +
                                    "': only the GEMM packing is supported (quantize with "
                                    "version gemm)");
    if (Error e = readModuleList(r, "modules_to_not_convert", q))
      return std::move(e);
    return q;
  }
  if (m == "gptq") {
    q.method = QuantMethod::Gptq;
    WEFT_ASSIGN_OR_RETURN(bits, r.optInt("bits", 1, 64));
    if (!bits)
      return r.error("bits", "missing (expected 4 or 8)");
    if (*bits != 4 && *bits != 8)
      return r.error("bits", llvm::formatv("GPTQ with {0} bits is not supported (4 or 8)",
                                           *bits));
    q.bits = int(*bits);
    WEFT_ASSIGN_OR_RETURN(group, r.optInt("group_size", -1, kMaxDim));
    if (!group || *group == 0)
      return r.error("group_size", "missing or 0 (expected -1 or the input features per "
                                   "scale, e.g. 128)");
    q.groupSize = *group == -1 ? 0 : *group;
    WEFT_ASSIGN_OR_RETURN(sym, r.optBool("sym"));
    q.zeroPoint = !sym.value_or(true);
    WEFT_ASSIGN_OR_RETURN(descAct, r.optBool("desc_act"));
    if (descAct.value_or(false))
      return r.error("desc_act", "act-order (desc_act true) is not supported: quantize "
                                 "with desc_act false");
    WEFT_ASSIGN_OR_RETURN(format, r.optString("checkpoint_format"));
    if (format && *format != "gptq")
      return r.error("checkpoint_format",
                     "'" + *format + "' is not supported (gptq, whose zeros are stored "
                                     "minus one)");
    return q;
  }
  if (m == "compressed-tensors")
    return parseCompressedTensors(r);
  return r.error("quant_method", "'" + *method +
                                     "' is not supported (awq, gptq, compressed-tensors); "
                                     "FP16 and BF16 checkpoints compile as they are");
}

// Every quantized projection's input splits into whole groups and its
// packed words into whole values.
Error checkQuantizedShapes(const ModelConfig &c, const FieldReader &r) {
  const Quantization &q = c.quant;
  int perWord = 32 / q.bits;
  struct Proj {
    const char *what;
    int64_t out, in;
  } projections[] = {{"q_proj", c.qWidth(), c.hiddenSize},
                     {"k_proj", c.kvWidth(), c.hiddenSize},
                     {"o_proj", c.hiddenSize, c.qWidth()},
                     {"gate_proj", c.intermediateSize, c.hiddenSize},
                     {"down_proj", c.hiddenSize, c.intermediateSize}};
  for (const Proj &p : projections) {
    if (q.groupSize && p.in % q.groupSize != 0)
      return r.error("quantization_config.group_size",
                     llvm::formatv("{0} does not divide the {1} inputs of {2}", q.groupSize,
                                   p.in, p.what));
    if (p.out % perWord != 0 || (q.method != QuantMethod::Awq && p.in % perWord != 0))
      return r.error("quantization_config.bits",
                     llvm::formatv("{0}: {1} x {2} does not pack into 32-bit words of {3} "
                                   "{4}-bit values",
                                   p.what, p.out, p.in, perWord, q.bits));
  }
  return Error::success();
}

Expected<io::DType> parseTorchDType(StringRef s, const FieldReader &r,
                                    StringRef field) {
  if (s == "float16" || s == "half")
    return io::DType::F16;
  if (s == "bfloat16")
    return io::DType::BF16;
  if (s == "float32" || s == "float")
    return io::DType::F32;
  return r.error(field, "unsupported dtype '" + s +
                            "' (supported: float16, bfloat16, float32)");
}

} // namespace

Expected<ModelConfig> parseModelConfig(StringRef text, StringRef file) {
  // llvm::json recurses per level: the nesting is measured first.
  if (weft::Status deep = weft::io::checkJsonNesting(std::string_view(text.data(), text.size()),
                                                    weft::io::kMaxJsonDepth, file.str());
      !deep.isOk())
    return makeError(deep.message());
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return makeError(llvm::Twine(file) + ": invalid JSON: " +
                     llvm::toString(parsed.takeError()));
  const json::Object *obj = parsed->getAsObject();
  if (!obj)
    return makeError(llvm::Twine(file) + ": expected a JSON object at the top level");
  FieldReader r(*obj, file);
  ModelConfig c;
  c.name = file.str();

  // Architecture.
  const json::Value *archs = r.get("architectures");
  if (!archs)
    return r.error("architectures", "missing (expected e.g. [\"LlamaForCausalLM\"])");
  const json::Array *archList = archs->getAsArray();
  if (!archList || archList->size() != 1 || !(*archList)[0].getAsString())
    return r.error("architectures",
                   "expected a list of one architecture name, got " + describe(*archs));
  c.architecture = (*archList)[0].getAsString()->str();
  const Architecture *arch = findArchitecture(c.architecture);
  if (!arch)
    return r.error("architectures", "unsupported architecture '" + c.architecture +
                                        "' (supported: " + supportedArchitectureNames() + ")");
  c.family = arch->family;
  StringRef expectedModelType = arch->modelType;
  WEFT_ASSIGN_OR_RETURN(modelType, r.optString("model_type"));
  if (modelType && *modelType != expectedModelType)
    return r.error("model_type", "'" + *modelType + "' does not match " +
                                     c.architecture + " (expected '" +
                                     expectedModelType + "')");

  // The activation: which one a family supports is the family's to say.
  WEFT_ASSIGN_OR_RETURN(act, r.optString("hidden_act"));
  if (act && *act == "gelu_pytorch_tanh")
    c.hiddenAct = Activation::GeluTanh;
  else if (act && *act != "silu")
    return r.error("hidden_act", "unsupported activation '" + *act +
                                     "' (supported: silu, gelu_pytorch_tanh)");

  // Dimensions.
  WEFT_ASSIGN_OR_RETURN(hidden, r.reqInt("hidden_size", 1, kMaxDim));
  WEFT_ASSIGN_OR_RETURN(inter, r.reqInt("intermediate_size", 1, kMaxDim));
  WEFT_ASSIGN_OR_RETURN(layers, r.reqInt("num_hidden_layers", 1, 4096));
  WEFT_ASSIGN_OR_RETURN(heads, r.reqInt("num_attention_heads", 1, 4096));
  WEFT_ASSIGN_OR_RETURN(kvHeads, r.optInt("num_key_value_heads", 1, 4096));
  WEFT_ASSIGN_OR_RETURN(headDim, r.optInt("head_dim", 1, 4096));
  WEFT_ASSIGN_OR_RETURN(vocab, r.reqInt("vocab_size", 1, kMaxDim));
  WEFT_ASSIGN_OR_RETURN(maxPos, r.optInt("max_position_embeddings", 1, kMaxDim * 64));
  c.hiddenSize = hidden;
  c.intermediateSize = inter;
  c.numLayers = layers;
  c.numHeads = heads;
  c.numKvHeads = kvHeads.value_or(heads);
  c.vocabSize = vocab;
  c.maxPositionEmbeddings = maxPos.value_or(4096);
  if (headDim) {
    c.headDim = *headDim;
  } else {
    if (hidden % heads != 0)
      return r.error("num_attention_heads",
                     llvm::formatv("hidden_size {0} is not divisible by {1} heads "
                                   "and no head_dim is given",
                                   hidden, heads));
    c.headDim = hidden / heads;
  }
  if (c.headDim % 2 != 0)
    return r.error("head_dim", llvm::formatv("expected an even head dimension "
                                             "for rotary embedding, got {0}",
                                             c.headDim));
  if (c.numHeads % c.numKvHeads != 0)
    return r.error("num_key_value_heads",
                   llvm::formatv("{0} query heads are not a multiple of {1} KV heads",
                                 c.numHeads, c.numKvHeads));

  // Normalization and rotary embedding.
  WEFT_ASSIGN_OR_RETURN(eps, r.optPositive("rms_norm_eps"));
  c.rmsNormEps = eps.value_or(1e-6);
  WEFT_ASSIGN_OR_RETURN(theta, r.optPositive("rope_theta"));
  c.ropeTheta = theta.value_or(10000.0);
  // transformers 5 moved rope_theta and the scaling into "rope_parameters".
  for (StringRef field : {"rope_scaling", "rope_parameters"}) {
    const json::Value *v = r.get(field);
    if (!v)
      continue;
    const json::Object *ropeObj = v->getAsObject();
    if (!ropeObj)
      return r.error(field, "expected an object or null, got " + describe(*v));
    WEFT_ASSIGN_OR_RETURN(rope, parseRopeScaling(*ropeObj, file, field));
    if (rope.type != RopeType::Default || field == "rope_scaling")
      c.rope = rope;
    FieldReader rr(*ropeObj, file, (field + ".").str());
    WEFT_ASSIGN_OR_RETURN(innerTheta, rr.optPositive("rope_theta"));
    if (innerTheta)
      c.ropeTheta = *innerTheta;
  }

  // Tying; biases, windows and the like are the family's
  // (Architectures/<family>.cpp).
  WEFT_ASSIGN_OR_RETURN(tie, r.optBool("tie_word_embeddings"));
  c.tieWordEmbeddings = tie.value_or(false);
  if (Error e = arch->readFields(r, c))
    return std::move(e);
  WEFT_ASSIGN_OR_RETURN(tp, r.optInt("pretraining_tp", 1, 1024));
  if (tp && *tp != 1)
    return r.error("pretraining_tp", llvm::formatv("expected 1, got {0}", *tp));

  // Dtype: transformers 5 writes "dtype", earlier versions "torch_dtype".
  c.dtype = io::DType::BF16;
  for (StringRef field : {"torch_dtype", "dtype"}) {
    WEFT_ASSIGN_OR_RETURN(dt, r.optString(field));
    if (!dt)
      continue;
    WEFT_ASSIGN_OR_RETURN(parsedDType, parseTorchDType(*dt, r, field));
    c.dtype = parsedDType;
  }

  // Quantized checkpoints (AWQ, GPTQ).
  if (const json::Value *quant = r.get("quantization_config")) {
    const json::Object *qObj = quant->getAsObject();
    if (!qObj)
      return r.error("quantization_config", "expected an object, got " + describe(*quant));
    WEFT_ASSIGN_OR_RETURN(q, parseQuantization(*qObj, file));
    c.quant = std::move(q);
    if (Error e = checkQuantizedShapes(c, r))
      return std::move(e);
  }

  // Special tokens (used by generation; optional).
  WEFT_ASSIGN_OR_RETURN(bos, r.optInt("bos_token_id", 0, kMaxDim));
  if (bos && *bos >= c.vocabSize)
    return r.error("bos_token_id", llvm::formatv("{0} is outside the vocabulary of {1}",
                                                 *bos, c.vocabSize));
  c.bosTokenId = bos;
  if (const json::Value *eos = r.get("eos_token_id")) {
    std::vector<const json::Value *> items;
    if (const json::Array *a = eos->getAsArray())
      for (const json::Value &e : *a)
        items.push_back(&e);
    else
      items.push_back(eos);
    for (const json::Value *e : items) {
      std::optional<int64_t> id = e->getAsInteger();
      if (!id || *id < 0 || *id >= c.vocabSize)
        return r.error("eos_token_id", "expected token ids in [0, " +
                                           llvm::Twine(c.vocabSize) + "), got " +
                                           describe(*eos));
      c.eosTokenIds.push_back(*id);
    }
  }
  return c;
}

Expected<ModelConfig> readModelConfig(StringRef path) {
  // Type and size are checked before a byte is read (a FIFO does not block).
  weft::StatusOr<std::string> text =
      weft::io::readRegularFile(path.str(), 64u << 20, "config.json");
  if (!text.isOk())
    return makeError(text.status().message());
  return parseModelConfig(*text, path);
}

} // namespace weft

// The reference interpreter: one plain loop nest per `weft` op, f32 storage
// with double accumulation, shapes checked against the IR at every step.
#include "compiler/Reference/Interpreter.h"
#include "compiler/Reference/ReferenceInterface.h"

#include "compiler/Import/QuantizedWeights.h"

#include "dialects/Dist/IR/DistDialect.h"

#include "dialects/Weft/IR/WeftOps.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <tuple>

using namespace mlir;

namespace weft::reference {

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

static int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor Tensor::floats(std::vector<int64_t> shape, std::vector<float> data) {
  Tensor t;
  t.shape = std::move(shape);
  t.f = std::move(data);
  return t;
}

Tensor Tensor::floats(std::vector<int64_t> shape) {
  size_t n = static_cast<size_t>(product(shape));
  return floats(std::move(shape), std::vector<float>(n, 0.0f));
}

Tensor Tensor::ints(std::vector<int64_t> shape, std::vector<int32_t> data) {
  Tensor t;
  t.shape = std::move(shape);
  t.i = std::move(data);
  t.isInt = true;
  return t;
}

Tensor Tensor::ints(std::vector<int32_t> data) {
  int64_t n = static_cast<int64_t>(data.size());
  return ints({n}, std::move(data));
}

int64_t Tensor::numElements() const { return product(shape); }

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error statusError(const Status &status) { return error(status.message()); }

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? "x" : "") + std::to_string(shape[d]);
  return s;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

} // namespace

//===----------------------------------------------------------------------===//
// WeightStore
//===----------------------------------------------------------------------===//

WeightStore::WeightStore() : mutex_(std::make_unique<std::mutex>()) {}
WeightStore::WeightStore(WeightStore &&) noexcept = default;
WeightStore &WeightStore::operator=(WeightStore &&) noexcept = default;
WeightStore::~WeightStore() = default;

llvm::Expected<WeightStore>
WeightStore::fromCheckpoint(const Checkpoint &checkpoint) {
  WeightStore store;
  for (const io::SafetensorsHeader &header : checkpoint.files) {
    StatusOr<io::MappedFile> file = io::MappedFile::open(header.path);
    if (!file)
      return statusError(file.status());
    // The header was validated against the file's size when the checkpoint
    // was opened; a different size now means the file changed underneath.
    if (file->size() != header.fileSize)
      return error(header.path + ": file is " + llvm::Twine(file->size()) +
                   " bytes, its header was read from a file of " +
                   llvm::Twine(header.fileSize));
    store.files_.push_back(
        std::make_unique<io::MappedFile>(std::move(file).value()));
  }
  for (const auto &[name, tensor] : checkpoint.tensors) {
    if (tensor.file >= checkpoint.files.size())
      return error("checkpoint tensor '" + name + "' names file " +
                   llvm::Twine(tensor.file) + " of " +
                   llvm::Twine(checkpoint.files.size()));
    store.sources_[name] = Source{tensor.file, tensor.info,
                                  checkpoint.files[tensor.file].dataOffset()};
  }
  store.quant_ = checkpoint.quant;
  return std::move(store);
}

void WeightStore::add(std::string name, Tensor tensor) {
  std::lock_guard<std::mutex> lock(*mutex_);
  tensors_[std::move(name)] = std::make_shared<const Tensor>(std::move(tensor));
}

bool WeightStore::contains(llvm::StringRef name) const {
  std::lock_guard<std::mutex> lock(*mutex_);
  return tensors_.count(name) || sources_.count(name);
}

llvm::Expected<std::shared_ptr<const Tensor>>
WeightStore::get(llvm::StringRef name) const {
  std::lock_guard<std::mutex> lock(*mutex_);
  if (auto it = tensors_.find(name); it != tensors_.end())
    return it->second;
  llvm::Expected<Tensor> t = Tensor();
  if (auto src = sources_.find(name); src != sources_.end())
    t = decode(name, src->second);
  else if (quant_.quantizes(name))
    t = dequantize(name);
  else
    return error("weight '" + name + "' is not in the weight store");
  if (!t)
    return t.takeError();
  auto shared = std::make_shared<const Tensor>(std::move(*t));
  tensors_[name.str()] = shared;
  return shared;
}

llvm::Expected<std::shared_ptr<const Tensor>>
WeightStore::getQuantized(llvm::StringRef name, QuantAttr quant, mlir::Type dtype) const {
  if (quant_.quantizes(name))
    return get(name);
  const int bits = int(quant.getBits());
  const int64_t group = quant.getGroup();
  const io::DType scaleType = dtype.isBF16() ? io::DType::BF16 : io::DType::F16;
  std::string key = (name + llvm::Twine("#") + stringifyQuantFormat(quant.getFormat()) +
                     llvm::Twine(bits) + "g" + llvm::Twine(group) +
                     (dtype.isBF16() ? "bf16" : "f16"))
                        .str();
  {
    std::lock_guard<std::mutex> lock(*mutex_);
    if (auto it = tensors_.find(key); it != tensors_.end())
      return it->second;
  }
  llvm::Expected<std::shared_ptr<const Tensor>> plain = get(name);
  if (!plain)
    return plain.takeError();
  const Tensor &w = **plain;
  if (w.isInt || w.shape.size() != 2 || group <= 0 || w.shape[1] % group != 0)
    return error("weight '" + name + "' cannot be quantized in groups of " + llvm::Twine(group));
  KernelProjection k = quantizeForKernels(w.f, w.shape[0], w.shape[1], bits, group,
                                          /*symmetric=*/bits == 8, quant.getFormat(), scaleType);
  std::vector<float> values(w.f.size());
  for (int64_t j = 0; j < w.shape[0]; ++j)
    for (int64_t i = 0; i < w.shape[1]; ++i)
      values[size_t(j * w.shape[1] + i)] = k.weight(j, i);
  auto shared = std::make_shared<const Tensor>(Tensor::floats(w.shape, std::move(values)));
  std::lock_guard<std::mutex> lock(*mutex_);
  tensors_[key] = shared;
  return shared;
}

llvm::Expected<Tensor> WeightStore::decode(llvm::StringRef name, const Source &s) const {
  const io::MappedFile &file = *files_[s.file];
  const io::TensorInfo &info = s.info;
  uint64_t count = info.numElements();
  uint64_t begin = s.dataOffset + info.dataBegin;
  uint64_t end = s.dataOffset + info.dataEnd;
  if (info.dataEnd < info.dataBegin || end > file.size() ||
      info.dataEnd - info.dataBegin != info.numBytes())
    return error(file.path() + ": tensor '" + name + "' has byte range [" +
                 llvm::Twine(begin) + ", " + llvm::Twine(end) +
                 ") that does not hold its " + llvm::Twine(count) +
                 " elements in a file of " + llvm::Twine(file.size()) + " bytes");
  Tensor t;
  t.shape = info.shape;
  if (info.dtype == io::DType::I32) { // packed words, little-endian
    t.isInt = true;
    t.i.resize(count);
    std::memcpy(t.i.data(), file.bytes().data() + begin, count * 4);
    return t;
  }
  t.f.resize(count);
  Status decoded =
      io::decodeToFloat(info.dtype, file.bytes().data() + begin, count, t.f.data());
  if (!decoded.isOk())
    return error(file.path() + ": tensor '" + name + "': " + decoded.message());
  return t;
}

llvm::Expected<Tensor> WeightStore::dequantize(llvm::StringRef name) const {
  std::string base = name.drop_back(std::strlen("weight")).str();
  std::map<std::string, Tensor> parts;
  const bool ct = quant_.method == QuantMethod::CompressedTensors;
  for (const char *part : {"qweight", "qzeros", "scales", "g_idx", "weight_packed",
                           "weight_scale"}) {
    llvm::StringRef p(part);
    if (ct != p.starts_with("weight_") ||
        (quant_.method == QuantMethod::Awq && p == "g_idx"))
      continue;
    auto src = sources_.find(base + part);
    if (src == sources_.end())
      return error("weight '" + name + "': its packed tensor '" + base + part +
                   "' is not in the checkpoint");
    llvm::Expected<Tensor> t = decode(base + part, src->second);
    if (!t)
      return t.takeError();
    bool wantInt = p != "scales" && p != "weight_scale";
    if (t->isInt != wantInt)
      return error("weight '" + name + "': '" + base + part + "' has the wrong dtype");
    parts[part] = std::move(*t);
  }
  if (ct) {
    const Tensor &packed = parts["weight_packed"];
    if (packed.shape.size() != 2)
      return error("weight '" + name + "': weight_packed is not a matrix");
    int64_t out = packed.shape[0], in = packed.shape[1] * (32 / quant_.bits);
    llvm::Expected<GptqTensors> t = gptqFromCompressedTensors(quant_, name, out, in, packed.i,
                                                              parts["weight_scale"].f);
    if (!t)
      return t.takeError();
    // Its scales are in the model's dtype (F16 or BF16), and so is the weight.
    io::DType type = sources_.find(base + "weight_scale")->second.info.dtype;
    llvm::Expected<std::vector<float>> w = dequantizeProjection(
        quant_, name, t->view(), type == io::DType::BF16 ? io::DType::BF16 : io::DType::F16);
    if (!w)
      return w.takeError();
    return Tensor::floats({out, in}, std::move(*w));
  }
  const Tensor &scales = parts["scales"];
  if (scales.shape.size() != 2)
    return error("weight '" + name + "': scales are not a matrix");
  PackedProjection p;
  p.out = scales.shape[1];
  p.in = quant_.method == QuantMethod::Awq ? parts["qweight"].shape[0]
                                           : int64_t(parts["g_idx"].i.size());
  p.qweight = parts["qweight"].i;
  p.qzeros = parts["qzeros"].i;
  p.scales = scales.f;
  if (quant_.method == QuantMethod::Gptq)
    p.gIdx = parts["g_idx"].i;
  llvm::Expected<std::vector<float>> w = dequantizeProjection(quant_, name, p);
  if (!w)
    return w.takeError();
  return Tensor::floats({p.out, p.in}, std::move(*w));
}

//===----------------------------------------------------------------------===//
// KvCache
//===----------------------------------------------------------------------===//

void KvCache::write(int64_t layer, int32_t slot, int32_t position,
                    llvm::ArrayRef<float> key, llvm::ArrayRef<float> value) {
  Entry &e = entries_[{layer, slot}][position];
  e.key.assign(key.begin(), key.end());
  e.value.assign(value.begin(), value.end());
}

const KvCache::Entry *KvCache::find(int64_t layer, int32_t slot,
                                    int32_t position) const {
  auto seq = entries_.find({layer, slot});
  if (seq == entries_.end())
    return nullptr;
  auto it = seq->second.find(position);
  return it == seq->second.end() ? nullptr : &it->second;
}

std::vector<std::pair<int32_t, const KvCache::Entry *>>
KvCache::range(int64_t layer, int32_t slot, int32_t first, int32_t last) const {
  std::vector<std::pair<int32_t, const Entry *>> out;
  auto seq = entries_.find({layer, slot});
  if (seq == entries_.end() || first > last)
    return out;
  for (auto it = seq->second.lower_bound(first);
       it != seq->second.end() && it->first <= last; ++it)
    out.emplace_back(it->first, &it->second);
  return out;
}

size_t KvCache::size() const {
  size_t n = 0;
  for (const auto &seq : entries_)
    n += seq.second.size();
  return n;
}

void KvCache::clear() { entries_.clear(); }

std::vector<std::pair<int64_t, KvCache::Entry>> KvCache::at(int32_t slot,
                                                           int32_t position) const {
  std::vector<std::pair<int64_t, Entry>> out;
  for (const auto &[key, positions] : entries_)
    if (key.second == slot)
      if (auto it = positions.find(position); it != positions.end())
        out.emplace_back(key.first, it->second);
  return out;
}

void KvCache::put(int32_t slot, int32_t position,
                  const std::vector<std::pair<int64_t, Entry>> &entries) {
  for (const auto &[layer, e] : entries)
    entries_[{layer, slot}][position] = e;
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

namespace {

// What a `!weft.kv_cache` value is bound to: the cache itself is interpreter
// state, so the value only has to exist.
const TensorRef &cacheToken() {
  static const TensorRef token = std::make_shared<const Tensor>();
  return token;
}

TensorRef share(Tensor t) { return std::make_shared<const Tensor>(std::move(t)); }

// Runtime tensor against an IR type: integer-ness, rank and every static dim.
llvm::Error checkAgainstType(const Tensor &t, Type type, const llvm::Twine &what) {
  if (llvm::isa<KvCacheType>(type))
    return llvm::Error::success();
  auto ranked = llvm::dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return error(what + " has type " + typeString(type) +
                 ", which the reference interpreter does not support");
  Type elem = ranked.getElementType();
  bool wantInt = llvm::isa<IntegerType>(elem);
  if (!wantInt && !llvm::isa<FloatType>(elem))
    return error(what + " has element type " + typeString(elem) +
                 ": expected a float or integer type");
  if (t.isInt != wantInt)
    return error(what + " is " + (t.isInt ? "an integer" : "a float") +
                 " tensor at run time but its type is " + typeString(type));
  bool shapeOk = static_cast<int64_t>(t.shape.size()) == ranked.getRank();
  for (int64_t d = 0; shapeOk && d < ranked.getRank(); ++d)
    shapeOk = ranked.isDynamicDim(d) || ranked.getDimSize(d) == t.shape[d];
  if (!shapeOk)
    return error(what + " has shape " + shapeString(t.shape) +
                 " at run time but its type is " + typeString(type));
  for (int64_t d : t.shape)
    if (d < 0)
      return error(what + " has a negative dimension: " + shapeString(t.shape));
  if (static_cast<int64_t>(t.dataSize()) != t.numElements())
    return error(what + " has " + llvm::Twine(t.dataSize()) +
                 " elements of data for shape " + shapeString(t.shape));
  return llvm::Error::success();
}

} // namespace

// Runs blocks op by op; each op's semantics is one method here, which
// attachReferenceSemantics attaches to the op as its ReferenceOpInterface.
class Evaluator {
public:
  Evaluator(const WeightStore &weights, KvCache &cache)
      : weights(weights), cache(cache) {}

  // Runs `block` with its arguments bound to `args` and returns the operands
  // of its terminator (func.return or weft.yield).
  Results runBlock(Block &block, llvm::ArrayRef<TensorRef> args);

  // Op semantics: results from the operands' values.
  using Ins = Operands;
  Results weight(WeightOp op, const Ins &in);
  Results embedding(EmbeddingOp op, const Ins &in);
  Results rmsNorm(RmsNormOp op, const Ins &in);
  Results headRmsNorm(HeadRmsNormOp op, const Ins &in);
  // softcap > 0: each output becomes softcap * tanh(output / softcap).
  Results linear(Operation *op, const Tensor &x, const Tensor &w,
                 const Tensor *bias, double softcap = 0.0);
  Results linearOp(LinearOp op, const Ins &in);
  Results logits(LogitsOp op, const Ins &in);
  Results add(AddOp op, const Ins &in);
  Results mul(MulOp op, const Ins &in);
  Results rope(RopeOp op, const Ins &in);
  Results kvWrite(KvWriteOp op, const Ins &in);
  Results attention(AttentionOp op, const Ins &in);
  Results silu(SiluOp op, const Ins &in);
  Results geluTanh(GeluTanhOp op, const Ins &in);
  Results elementwise(Operation *op, const Ins &in, bool multiply);
  Results argmax(ArgmaxOp op, const Ins &in);
  Results sample(SampleOp op, const Ins &in);
  Results weightConcat(WeightConcatOp op, const Ins &in);
  Results split(SplitOp op, const Ins &in);
  Results fusion(FusionOp op, const Ins &in);
  // dist.transfer and dist.all_reduce: placement does not change values.
  Results placement(Operation *op, const Ins &in);

private:
  using Env = llvm::DenseMap<Value, TensorRef>;

  llvm::Error execute(Operation *op, Env &env);

  const WeightStore &weights;
  KvCache &cache;
};

namespace {

std::string nameOf(Operation *op) { return op->getName().getStringRef().str(); }

// Checks that `t` is a rank-2 float tensor (activations, logits, weights).
llvm::Error expectMatrix(Operation *op, const Tensor &t, llvm::StringRef what) {
  if (t.isInt || t.shape.size() != 2)
    return error(nameOf(op) + ": " + what + " must be a rank-2 float tensor, got " +
                 (t.isInt ? "integer " : "float ") + shapeString(t.shape));
  return llvm::Error::success();
}

// Checks that `t` is a per-token vector of `tokens` elements.
llvm::Error expectPerToken(Operation *op, const Tensor &t, int64_t tokens,
                           bool isInt, llvm::StringRef what) {
  if (t.isInt != isInt || t.shape.size() != 1 || t.shape[0] != tokens)
    return error(nameOf(op) + ": " + what + " must be a " +
                 (isInt ? "i32" : "f32") + " vector of " + llvm::Twine(tokens) +
                 " tokens, got " + (t.isInt ? "integer " : "float ") +
                 shapeString(t.shape));
  return llvm::Error::success();
}

} // namespace

Results Evaluator::runBlock(Block &block, llvm::ArrayRef<TensorRef> args) {
  if (block.getNumArguments() != args.size())
    return error("block has " + llvm::Twine(block.getNumArguments()) +
                 " arguments but " + llvm::Twine(args.size()) + " values were given");
  Env env;
  for (auto [arg, value] : llvm::zip(block.getArguments(), args))
    env[arg] = value;
  for (Operation &op : block) {
    if (llvm::isa<func::ReturnOp, YieldOp>(op)) {
      std::vector<TensorRef> out;
      for (Value v : op.getOperands()) {
        auto it = env.find(v);
        if (it == env.end())
          return error(nameOf(&op) + ": operand is not defined in this block");
        out.push_back(it->second);
      }
      return out;
    }
    if (llvm::Error e = execute(&op, env))
      return std::move(e);
  }
  return error("block ends without func.return or weft.yield");
}

llvm::Error Evaluator::execute(Operation *op, Env &env) {
  auto semantics = llvm::dyn_cast<ReferenceOpInterface>(op);
  if (!semantics)
    return error("reference interpreter: unsupported op '" + nameOf(op) + "'");
  std::vector<const Tensor *> in;
  for (auto [index, v] : llvm::enumerate(op->getOperands())) {
    auto it = env.find(v);
    if (it == env.end())
      return error(nameOf(op) + ": operand " + llvm::Twine(index) +
                   " is not defined (values from enclosing regions are not visible)");
    in.push_back(it->second.get());
  }
  Results results = semantics.evaluate(*this, in);
  if (!results)
    return results.takeError();
  if (results->size() != op->getNumResults())
    return error(nameOf(op) + ": produced " + llvm::Twine(results->size()) +
                 " results for " + llvm::Twine(op->getNumResults()));
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    TensorRef &value = (*results)[index];
    if (llvm::Error e = checkAgainstType(
            *value, result.getType(), nameOf(op) + " result " + llvm::Twine(index)))
      return e;
    env[result] = llvm::isa<KvCacheType>(result.getType()) ? cacheToken() : value;
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Op semantics
//===----------------------------------------------------------------------===//

Results Evaluator::weight(WeightOp op, const Ins &) {
  QuantAttr quant = op.getQuantAttr();
  llvm::Expected<TensorRef> t =
      quant ? weights.getQuantized(op.getName(), quant, op.getType().getElementType())
            : weights.get(op.getName());
  if (!t)
    return error(nameOf(op) + ": " + llvm::toString(t.takeError()));
  auto type = op.getResult().getType();
  if (llvm::ArrayRef<int64_t>((*t)->shape) != type.getShape())
    return error(nameOf(op) + ": weight '" + op.getName() + "' has shape " +
                 shapeString((*t)->shape) + " in the weight store but the IR declares " +
                 typeString(type));
  // Integer weights (quantized formats) would need their own decoding.
  if (llvm::isa<IntegerType>(type.getElementType()))
    return error(nameOf(op) + ": weight '" + op.getName() +
                 "' has integer type " + typeString(type) + ", which is not supported");
  return std::vector<TensorRef>{*t};
}

Results Evaluator::embedding(EmbeddingOp op, const Ins &in) {
  const Tensor &table = *in[0], &ids = *in[1];
  if (llvm::Error e = expectMatrix(op, table, "table"))
    return std::move(e);
  if (!ids.isInt || ids.shape.size() != 1)
    return error(nameOf(op) + ": ids must be an i32 vector, got " +
                 shapeString(ids.shape));
  int64_t vocab = table.shape[0], hidden = table.shape[1], tokens = ids.shape[0];
  Tensor out = Tensor::floats({tokens, hidden});
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t id = ids.i[t];
    if (id < 0 || id >= vocab)
      return error(nameOf(op) + ": token id " + llvm::Twine(id) + " (token " +
                   llvm::Twine(t) + ") is outside the vocabulary [0, " +
                   llvm::Twine(vocab) + ")");
    std::copy_n(&table.f[id * hidden], hidden, &out.f[t * hidden]);
  }
  if (op.getScale()) {
    // Gemma's normalizer is a tensor of the model's dtype.
    float scale = float(op.roundedScale());
    for (float &v : out.f)
      v *= scale;
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

Results Evaluator::rmsNorm(RmsNormOp op, const Ins &in) {
  const Tensor &x = *in[0], &w = *in[1];
  if (llvm::Error e = expectMatrix(op, x, "input"))
    return std::move(e);
  int64_t tokens = x.shape[0], width = x.shape[1];
  if (w.isInt || w.shape != std::vector<int64_t>{width})
    return error(nameOf(op) + ": weight has shape " + shapeString(w.shape) +
                 ", expected " + llvm::Twine(width));
  double eps = op.getEpsilon().convertToDouble();
  Tensor out = Tensor::floats({tokens, width});
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = &x.f[t * width];
    double sumSq = 0.0;
    for (int64_t j = 0; j < width; ++j)
      sumSq += double(row[j]) * row[j];
    // Hugging Face normalizes in f32 first and multiplies by the weight
    // after; keeping that order keeps the rounding the same.
    double inv = 1.0 / std::sqrt(sumSq / double(width) + eps);
    float offset = float(op.weightOffsetOrZero());
    for (int64_t j = 0; j < width; ++j)
      out.f[t * width + j] = (offset + w.f[j]) * float(row[j] * inv);
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

// Each head of `dim` features normalized on its own, as rmsNorm a row.
Results Evaluator::headRmsNorm(HeadRmsNormOp op, const Ins &in) {
  const Tensor &x = *in[0], &w = *in[1];
  if (llvm::Error e = expectMatrix(op, x, "input"))
    return std::move(e);
  int64_t tokens = x.shape[0], width = x.shape[1], dim = op.getHeadDim();
  if (width % dim != 0)
    return error(nameOf(op) + ": input width " + llvm::Twine(width) +
                 " is not a multiple of head_dim " + llvm::Twine(dim));
  if (w.isInt || w.shape != std::vector<int64_t>{dim})
    return error(nameOf(op) + ": weight has shape " + shapeString(w.shape) +
                 ", expected " + llvm::Twine(dim));
  double eps = op.getEpsilon().convertToDouble();
  Tensor out = Tensor::floats({tokens, width});
  for (int64_t r = 0; r < tokens * width; r += dim) {
    const float *head = &x.f[r];
    double sumSq = 0.0;
    for (int64_t j = 0; j < dim; ++j)
      sumSq += double(head[j]) * head[j];
    double inv = 1.0 / std::sqrt(sumSq / double(dim) + eps);
    for (int64_t j = 0; j < dim; ++j)
      out.f[r + j] = w.f[j] * float(head[j] * inv);
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

// weft.linear (x·Wᵀ + b) and weft.logits (x·Wᵀ), W in torch.nn.Linear layout.
Results Evaluator::linearOp(LinearOp op, const Ins &in) {
  return linear(op, *in[0], *in[1], in.size() > 2 ? in[2] : nullptr);
}

Results Evaluator::logits(LogitsOp op, const Ins &in) {
  return linear(op, *in[0], *in[1], nullptr,
                op.getSoftcap() ? op.getSoftcap()->convertToDouble() : 0.0);
}

Results Evaluator::linear(Operation *op, const Tensor &x, const Tensor &w,
                         const Tensor *bias, double softcap) {
  if (llvm::Error e = expectMatrix(op, x, "input"))
    return std::move(e);
  if (llvm::Error e = expectMatrix(op, w, "weight"))
    return std::move(e);
  int64_t tokens = x.shape[0], k = x.shape[1], n = w.shape[0];
  if (w.shape[1] != k)
    return error(nameOf(op) + ": weight " + shapeString(w.shape) +
                 " does not match input width " + llvm::Twine(k));
  if (bias && (bias->isInt || bias->shape != std::vector<int64_t>{n}))
    return error(nameOf(op) + ": bias has shape " + shapeString(bias->shape) +
                 ", expected " + llvm::Twine(n));
  Tensor out = Tensor::floats({tokens, n});
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = &x.f[t * k];
    for (int64_t o = 0; o < n; ++o) {
      const float *wr = &w.f[o * k];
      double acc = 0.0;
      for (int64_t j = 0; j < k; ++j)
        acc += double(row[j]) * wr[j];
      if (bias)
        acc += bias->f[o];
      if (softcap > 0.0)
        acc = softcap * std::tanh(acc / softcap);
      out.f[t * n + o] = float(acc);
    }
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

// inv_freq of a rope op (RopeOp::inverseFrequencies), errors named by op.
llvm::Expected<std::vector<double>> ropeInvFreq(RopeOp op) {
  llvm::Expected<std::vector<double>> inv = op.inverseFrequencies();
  if (!inv)
    return error(nameOf(op) + ": " + llvm::toString(inv.takeError()));
  return inv;
}

Results Evaluator::rope(RopeOp op, const Ins &in) {
  const Tensor &x = *in[0], &positions = *in[1];
  if (llvm::Error e = expectMatrix(op, x, "input"))
    return std::move(e);
  int64_t tokens = x.shape[0], width = x.shape[1], dim = op.getHeadDim();
  if (llvm::Error e = expectPerToken(op, positions, tokens, true, "positions"))
    return std::move(e);
  if (dim % 2 != 0 || width % dim != 0)
    return error(nameOf(op) + ": input width " + llvm::Twine(width) +
                 " is not a multiple of the even head_dim " + llvm::Twine(dim));
  llvm::Expected<std::vector<double>> inv = ropeInvFreq(op);
  if (!inv)
    return inv.takeError();
  int64_t half = dim / 2;
  Tensor out = Tensor::floats({tokens, width});
  for (int64_t t = 0; t < tokens; ++t) {
    double pos = positions.i[t];
    for (int64_t i = 0; i < half; ++i) {
      double angle = pos * (*inv)[i];
      double c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < width; h += dim) {
        double x1 = x.f[t * width + h + i], x2 = x.f[t * width + h + i + half];
        out.f[t * width + h + i] = float(x1 * c - x2 * s);
        out.f[t * width + h + i + half] = float(x2 * c + x1 * s);
      }
    }
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

// Positions and slots index the cache; negative ones are run-time errors.
llvm::Error checkIndex(Operation *op, const Tensor &v, int64_t t,
                       llvm::StringRef what) {
  if (v.i[t] < 0)
    return error(nameOf(op) + ": " + what + " of token " + llvm::Twine(t) +
                 " is negative (" + llvm::Twine(v.i[t]) + ")");
  return llvm::Error::success();
}

Results Evaluator::kvWrite(KvWriteOp op, const Ins &in) {
  const Tensor &key = *in[0], &value = *in[1], &positions = *in[2],
               &slots = *in[3];
  KvCacheType type = op.getCache().getType();
  int64_t layer = op.getLayer();
  int64_t width = type.getKvHeads() * type.getHeadDim();
  if (layer >= type.getLayers())
    return error(nameOf(op) + ": layer " + llvm::Twine(layer) +
                 " is outside the cache's " + llvm::Twine(type.getLayers()) + " layers");
  for (auto [t, what] : {std::pair<const Tensor *, const char *>{&key, "key"},
                         {&value, "value"}}) {
    if (llvm::Error e = expectMatrix(op, *t, what))
      return std::move(e);
    if (t->shape[1] != width || t->shape[0] != key.shape[0])
      return error(nameOf(op) + ": " + what + " has shape " + shapeString(t->shape) +
                   ", expected " + llvm::Twine(key.shape[0]) + "x" +
                   llvm::Twine(width) + " (kv_heads * head_dim)");
  }
  int64_t tokens = key.shape[0];
  if (llvm::Error e = expectPerToken(op, positions, tokens, true, "positions"))
    return std::move(e);
  if (llvm::Error e = expectPerToken(op, slots, tokens, true, "slots"))
    return std::move(e);
  for (int64_t t = 0; t < tokens; ++t) {
    if (llvm::Error e = checkIndex(op, positions, t, "position"))
      return std::move(e);
    if (llvm::Error e = checkIndex(op, slots, t, "slot"))
      return std::move(e);
    cache.write(layer, slots.i[t], positions.i[t],
                llvm::ArrayRef<float>(&key.f[t * width], width),
                llvm::ArrayRef<float>(&value.f[t * width], width));
  }
  return std::vector<TensorRef>{};
}

Results Evaluator::attention(AttentionOp op, const Ins &in) {
  const Tensor &q = *in[0], &positions = *in[1], &slots = *in[2];
  int64_t layer = op.getLayer(), heads = op.getNumHeads(),
          kvHeads = op.getNumKvHeads(), dim = op.getHeadDim();
  double scale = op.getScale().convertToDouble();
  double softcap = op.getSoftcap() ? op.getSoftcap()->convertToDouble() : 0.0;
  if (heads % kvHeads != 0)
    return error(nameOf(op) + ": num_heads " + llvm::Twine(heads) +
                 " is not a multiple of num_kv_heads " + llvm::Twine(kvHeads));
  if (llvm::Error e = expectMatrix(op, q, "query"))
    return std::move(e);
  int64_t tokens = q.shape[0], width = heads * dim, kvWidth = kvHeads * dim;
  if (q.shape[1] != width)
    return error(nameOf(op) + ": query width " + llvm::Twine(q.shape[1]) +
                 " is not num_heads * head_dim = " + llvm::Twine(width));
  if (llvm::Error e = expectPerToken(op, positions, tokens, true, "positions"))
    return std::move(e);
  if (llvm::Error e = expectPerToken(op, slots, tokens, true, "slots"))
    return std::move(e);
  int64_t group = heads / kvHeads;
  std::optional<int64_t> window;
  if (auto w = op.getSlidingWindow())
    window = *w;

  Tensor out = Tensor::floats({tokens, width});
  std::vector<double> scores;
  for (int64_t t = 0; t < tokens; ++t) {
    if (llvm::Error e = checkIndex(op, positions, t, "position"))
      return std::move(e);
    if (llvm::Error e = checkIndex(op, slots, t, "slot"))
      return std::move(e);
    int32_t pos = positions.i[t], slot = slots.i[t];
    // With a window W, position p is visible when pos - p < W.
    int64_t first = window ? std::max<int64_t>(0, int64_t(pos) - *window + 1) : 0;
    auto keys = cache.range(layer, slot, int32_t(first), pos);
    if (keys.empty())
      return error(nameOf(op) + ": no keys in the cache for layer " +
                   llvm::Twine(layer) + ", slot " + llvm::Twine(slot) +
                   " at positions " + llvm::Twine(first) + ".." + llvm::Twine(pos) +
                   " (weft.kv_write must come first)");
    for (const auto &[p, entry] : keys)
      if (int64_t(entry->key.size()) != kvWidth)
        return error(nameOf(op) + ": cached key at position " + llvm::Twine(p) +
                     " has width " + llvm::Twine(entry->key.size()) +
                     ", expected num_kv_heads * head_dim = " + llvm::Twine(kvWidth));
    scores.resize(keys.size());
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kvOffset = (h / group) * dim;
      const float *qh = &q.f[t * width + h * dim];
      double maxScore = -INFINITY;
      for (size_t j = 0; j < keys.size(); ++j) {
        const float *kh = &keys[j].second->key[kvOffset];
        double dot = 0.0;
        for (int64_t d = 0; d < dim; ++d)
          dot += double(qh[d]) * kh[d];
        scores[j] = dot * scale;
        if (softcap > 0.0)
          scores[j] = softcap * std::tanh(scores[j] / softcap);
        maxScore = std::max(maxScore, scores[j]);
      }
      double sum = 0.0;
      for (double &s : scores) {
        s = std::exp(s - maxScore);
        sum += s;
      }
      float *oh = &out.f[t * width + h * dim];
      for (int64_t d = 0; d < dim; ++d) {
        double acc = 0.0;
        for (size_t j = 0; j < keys.size(); ++j)
          acc += scores[j] * keys[j].second->value[kvOffset + d];
        oh[d] = float(acc / sum);
      }
    }
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

Results Evaluator::silu(SiluOp op, const Ins &in) {
  const Tensor &x = *in[0];
  if (x.isInt)
    return error(nameOf(op) + ": input must be a float tensor");
  Tensor out = Tensor::floats(x.shape);
  for (size_t j = 0; j < x.f.size(); ++j)
    out.f[j] = float(double(x.f[j]) / (1.0 + std::exp(-double(x.f[j]))));
  return std::vector<TensorRef>{share(std::move(out))};
}

Results Evaluator::geluTanh(GeluTanhOp op, const Ins &in) {
  const Tensor &x = *in[0];
  if (x.isInt)
    return error(nameOf(op) + ": input must be a float tensor");
  Tensor out = Tensor::floats(x.shape);
  const double k = std::sqrt(2.0 / M_PI);
  for (size_t j = 0; j < x.f.size(); ++j) {
    double v = x.f[j];
    out.f[j] = float(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
  }
  return std::vector<TensorRef>{share(std::move(out))};
}

Results Evaluator::add(AddOp op, const Ins &in) { return elementwise(op, in, false); }
Results Evaluator::mul(MulOp op, const Ins &in) { return elementwise(op, in, true); }

Results Evaluator::placement(Operation *, const Ins &in) {
  // A transfer moves the tensor as it is, and an all-reduce of a region's
  // (full) result is that result.
  return std::vector<TensorRef>{share(Tensor(*in[0]))};
}

Results Evaluator::elementwise(Operation *op, const Ins &in, bool multiply) {
  const Tensor &a = *in[0], &b = *in[1];
  if (a.isInt || b.isInt || a.shape != b.shape)
    return error(nameOf(op) + ": operands must be float tensors of one shape, got " +
                 shapeString(a.shape) + " and " + shapeString(b.shape));
  Tensor out = Tensor::floats(a.shape);
  for (size_t j = 0; j < a.f.size(); ++j)
    out.f[j] = multiply ? a.f[j] * b.f[j] : a.f[j] + b.f[j];
  return std::vector<TensorRef>{share(std::move(out))};
}

// Lowest index of the largest value of `row`.
int32_t argmaxRow(const float *row, int64_t n) {
  int64_t best = 0;
  for (int64_t j = 1; j < n; ++j)
    if (row[j] > row[best])
      best = j;
  return int32_t(best);
}

Results Evaluator::argmax(ArgmaxOp op, const Ins &in) {
  const Tensor &logits = *in[0];
  if (llvm::Error e = expectMatrix(op, logits, "logits"))
    return std::move(e);
  int64_t tokens = logits.shape[0], vocab = logits.shape[1];
  if (vocab == 0)
    return error(nameOf(op) + ": logits have no columns");
  std::vector<int32_t> next(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    next[t] = argmaxRow(&logits.f[t * vocab], vocab);
  return std::vector<TensorRef>{share(Tensor::ints(std::move(next)))};
}

Results Evaluator::sample(SampleOp op, const Ins &in) {
  const Tensor &logits = *in[0], &temperature = *in[1], &topK = *in[2],
               &topP = *in[3], &uniform = *in[4];
  if (llvm::Error e = expectMatrix(op, logits, "logits"))
    return std::move(e);
  int64_t tokens = logits.shape[0], vocab = logits.shape[1];
  if (vocab == 0)
    return error(nameOf(op) + ": logits have no columns");
  for (auto [t, isInt, what] :
       {std::tuple<const Tensor *, bool, const char *>{&temperature, false, "temperature"},
        {&topK, true, "top_k"},
        {&topP, false, "top_p"},
        {&uniform, false, "uniform"}})
    if (llvm::Error e = expectPerToken(op, *t, tokens, isInt, what))
      return std::move(e);

  std::vector<int32_t> next(tokens);
  std::vector<int32_t> order(vocab);
  std::vector<double> probs;
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = &logits.f[t * vocab];
    float temp = temperature.f[t], p = topP.f[t], u = uniform.f[t];
    if (!(temp >= 0.0f) || std::isinf(temp))
      return error(nameOf(op) + ": temperature of token " + llvm::Twine(t) +
                   " is " + number(temp) + ": expected a finite value >= 0");
    if (!(u >= 0.0f && u < 1.0f))
      return error(nameOf(op) + ": uniform of token " + llvm::Twine(t) + " is " +
                   number(u) + ": expected a number in [0, 1)");
    if (std::isnan(p))
      return error(nameOf(op) + ": top_p of token " + llvm::Twine(t) + " is NaN");
    for (int64_t j = 0; j < vocab; ++j)
      if (std::isnan(row[j]) || row[j] == INFINITY)
        return error(nameOf(op) + ": logit " + llvm::Twine(j) + " of token " +
                     llvm::Twine(t) + " is NaN or +inf");
    if (temp == 0.0f) {
      next[t] = argmaxRow(row, vocab);
      continue;
    }
    // Candidates by decreasing logit, ties to the lower id, so top_k = 1
    // agrees with argmax.
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return row[a] != row[b] ? row[a] > row[b] : a < b;
    });
    int64_t k = topK.i[t] <= 0 ? vocab : std::min<int64_t>(topK.i[t], vocab);
    if (row[order[0]] == -INFINITY)
      return error(nameOf(op) + ": every logit of token " + llvm::Twine(t) +
                   " is -inf");
    // Softmax over the top-k candidates of logits / temperature.
    probs.assign(k, 0.0);
    double top = double(row[order[0]]) / temp, sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      probs[j] = std::exp(double(row[order[j]]) / temp - top);
      sum += probs[j];
    }
    // Nucleus: the shortest prefix whose probability reaches top_p (at least
    // one token), then renormalized.
    int64_t kept = 0;
    double mass = 0.0;
    while (kept < k) {
      mass += probs[kept] / sum;
      ++kept;
      if (mass >= p)
        break;
    }
    double keptSum = 0.0;
    for (int64_t j = 0; j < kept; ++j)
      keptSum += probs[j];
    int32_t chosen = order[kept - 1]; // if rounding leaves u above the total
    double cumulative = 0.0;
    for (int64_t j = 0; j < kept; ++j) {
      cumulative += probs[j] / keptSum;
      if (cumulative > u) {
        chosen = order[j];
        break;
      }
    }
    next[t] = chosen;
  }
  return std::vector<TensorRef>{share(Tensor::ints(std::move(next)))};
}

Results Evaluator::weightConcat(WeightConcatOp op, const Ins &in) {
  if (in.empty())
    return error(nameOf(op) + ": requires at least one input");
  int64_t axis = op.getAxis();
  const Tensor &first = *in[0];
  int64_t rank = first.shape.size();
  if (axis >= rank)
    return error(nameOf(op) + ": axis " + llvm::Twine(axis) +
                 " is out of range for rank " + llvm::Twine(rank));
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (const Tensor *t : in) {
    bool ok = !t->isInt && int64_t(t->shape.size()) == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis || t->shape[d] == first.shape[d];
    if (!ok)
      return error(nameOf(op) + ": input of shape " + shapeString(t->shape) +
                   " does not match " + shapeString(first.shape) +
                   " outside axis " + llvm::Twine(axis));
    shape[axis] += t->shape[axis];
  }
  // Row-major: each of the `outer` slabs is the inputs' slabs back to back.
  int64_t outer = product(llvm::ArrayRef<int64_t>(shape).take_front(axis));
  int64_t inner = product(llvm::ArrayRef<int64_t>(shape).drop_front(axis + 1));
  Tensor out;
  out.shape = shape;
  out.f.reserve(product(shape));
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor *t : in) {
      int64_t chunk = t->shape[axis] * inner;
      out.f.insert(out.f.end(), t->f.begin() + o * chunk,
                   t->f.begin() + (o + 1) * chunk);
    }
  return std::vector<TensorRef>{share(std::move(out))};
}

Results Evaluator::split(SplitOp op, const Ins &in) {
  const Tensor &x = *in[0];
  if (llvm::Error e = expectMatrix(op, x, "input"))
    return std::move(e);
  llvm::ArrayRef<int64_t> sizes = op.getSizes();
  int64_t tokens = x.shape[0], width = x.shape[1], total = 0;
  for (int64_t s : sizes) {
    if (s <= 0)
      return error(nameOf(op) + ": size " + llvm::Twine(s) + " is not positive");
    total += s;
  }
  if (total != width)
    return error(nameOf(op) + ": sizes add up to " + llvm::Twine(total) +
                 ", input width is " + llvm::Twine(width));
  std::vector<TensorRef> results;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    Tensor out = Tensor::floats({tokens, s});
    for (int64_t t = 0; t < tokens; ++t)
      std::copy_n(&x.f[t * width + offset], s, &out.f[t * s]);
    offset += s;
    results.push_back(share(std::move(out)));
  }
  return results;
}

Results Evaluator::fusion(FusionOp op, const Ins &in) {
  Block &body = op.getBody().front();
  if (body.getNumArguments() != in.size())
    return error(nameOf(op) + " \"" + op.getKind() + "\": body has " +
                 llvm::Twine(body.getNumArguments()) + " arguments for " +
                 llvm::Twine(in.size()) + " inputs");
  std::vector<TensorRef> args;
  for (auto [index, arg] : llvm::enumerate(body.getArguments())) {
    if (llvm::isa<KvCacheType>(arg.getType())) {
      args.push_back(cacheToken());
      continue;
    }
    if (llvm::Error e = checkAgainstType(*in[index], arg.getType(),
                                         nameOf(op) + " \"" + op.getKind() +
                                             "\" body argument " + llvm::Twine(index)))
      return std::move(e);
    // The inputs stay alive in the caller's environment for the whole call.
    args.push_back(TensorRef(TensorRef(), in[index]));
  }
  Results results = runBlock(body, args);
  if (!results)
    return error(nameOf(op) + " \"" + op.getKind() + "\": " +
                 llvm::toString(results.takeError()));
  return results;
}


//===----------------------------------------------------------------------===//
// Interpreter
//===----------------------------------------------------------------------===//

Interpreter::Interpreter(const WeightStore &weights, KvCache *cache)
    : weights_(weights) {
  if (!cache) {
    ownedCache_ = std::make_unique<KvCache>();
    cache = ownedCache_.get();
  }
  cache_ = cache;
}

llvm::Expected<std::vector<Tensor>> Interpreter::run(func::FuncOp fn,
                                                     std::vector<Tensor> args) {
  std::string name = "@" + fn.getSymName().str();
  if (fn.isExternal())
    return error(name + " has no body");
  if (!fn.getBody().hasOneBlock())
    return error(name + " has " + llvm::Twine(fn.getBody().getBlocks().size()) +
                 " blocks; the reference interpreter runs single-block functions");
  // The op semantics below rely on verified IR (operand counts, attribute
  // and cache types); a broken rewrite must be an error here, not a crash.
  {
    std::string diagnostic;
    ScopedDiagnosticHandler handler(fn.getContext(), [&](Diagnostic &diag) {
      if (diagnostic.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
        diagnostic = diag.str();
      return success(); // consumed: the message goes into the llvm::Error
    });
    if (failed(mlir::verify(fn.getOperation()))) {
      std::replace(diagnostic.begin(), diagnostic.end(), '\n', ' ');
      return error(name + " does not verify: " +
                   (diagnostic.empty() ? std::string("(no message)") : diagnostic));
    }
  }
  FunctionType type = fn.getFunctionType();
  if (args.size() != type.getNumInputs())
    return error(name + " takes " + llvm::Twine(type.getNumInputs()) +
                 " arguments, " + llvm::Twine(args.size()) + " were given");
  std::vector<TensorRef> bound;
  for (auto [index, arg] : llvm::enumerate(args)) {
    Type argType = type.getInput(index);
    if (llvm::isa<KvCacheType>(argType)) {
      bound.push_back(cacheToken());
      continue;
    }
    if (llvm::Error e = checkAgainstType(arg, argType,
                                         name + " argument " + llvm::Twine(index)))
      return std::move(e);
    bound.push_back(share(std::move(arg)));
  }
  attachReferenceSemantics(*fn->getContext());
  Evaluator executor(weights_, *cache_);
  Results results = executor.runBlock(fn.getBody().front(), bound);
  if (!results)
    return error(name + ": " + llvm::toString(results.takeError()));
  if (results->size() != type.getNumResults())
    return error(name + " returned " + llvm::Twine(results->size()) +
                 " values, its type has " + llvm::Twine(type.getNumResults()));
  std::vector<Tensor> out;
  for (auto [index, value] : llvm::enumerate(*results)) {
    if (llvm::Error e = checkAgainstType(*value, type.getResult(index),
                                         name + " result " + llvm::Twine(index)))
      return std::move(e);
    out.push_back(*value);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// ReferenceOpInterface models
//===----------------------------------------------------------------------===//

namespace {

// The interface of op `OpT`, answered by `Method` of the evaluator.
template <typename OpT, Results (Evaluator::*Method)(OpT, const Evaluator::Ins &)>
struct EvaluateWith
    : ReferenceOpInterface::ExternalModel<EvaluateWith<OpT, Method>, OpT> {
  Results evaluate(Operation *op, Evaluator &evaluator, Operands in) const {
    return (evaluator.*Method)(llvm::cast<OpT>(op), in);
  }
};

template <typename OpT>
struct Placement : ReferenceOpInterface::ExternalModel<Placement<OpT>, OpT> {
  Results evaluate(Operation *op, Evaluator &evaluator, Operands in) const {
    return evaluator.placement(op, in);
  }
};

} // namespace

void attachReferenceSemantics(MLIRContext &context) {
  context.getOrLoadDialect<WeftDialect>();
  context.getOrLoadDialect<dist::DistDialect>();
  if (OperationName(WeightOp::getOperationName(), &context)
          .hasInterface<ReferenceOpInterface>())
    return; // attached before, in this context
  WeightOp::attachInterface<EvaluateWith<WeightOp, &Evaluator::weight>>(context);
  WeightConcatOp::attachInterface<EvaluateWith<WeightConcatOp, &Evaluator::weightConcat>>(context);
  EmbeddingOp::attachInterface<EvaluateWith<EmbeddingOp, &Evaluator::embedding>>(context);
  RmsNormOp::attachInterface<EvaluateWith<RmsNormOp, &Evaluator::rmsNorm>>(context);
  HeadRmsNormOp::attachInterface<EvaluateWith<HeadRmsNormOp, &Evaluator::headRmsNorm>>(context);
  LinearOp::attachInterface<EvaluateWith<LinearOp, &Evaluator::linearOp>>(context);
  LogitsOp::attachInterface<EvaluateWith<LogitsOp, &Evaluator::logits>>(context);
  RopeOp::attachInterface<EvaluateWith<RopeOp, &Evaluator::rope>>(context);
  KvWriteOp::attachInterface<EvaluateWith<KvWriteOp, &Evaluator::kvWrite>>(context);
  AttentionOp::attachInterface<EvaluateWith<AttentionOp, &Evaluator::attention>>(context);
  SiluOp::attachInterface<EvaluateWith<SiluOp, &Evaluator::silu>>(context);
  GeluTanhOp::attachInterface<EvaluateWith<GeluTanhOp, &Evaluator::geluTanh>>(context);
  AddOp::attachInterface<EvaluateWith<AddOp, &Evaluator::add>>(context);
  MulOp::attachInterface<EvaluateWith<MulOp, &Evaluator::mul>>(context);
  ArgmaxOp::attachInterface<EvaluateWith<ArgmaxOp, &Evaluator::argmax>>(context);
  SampleOp::attachInterface<EvaluateWith<SampleOp, &Evaluator::sample>>(context);
  SplitOp::attachInterface<EvaluateWith<SplitOp, &Evaluator::split>>(context);
  FusionOp::attachInterface<EvaluateWith<FusionOp, &Evaluator::fusion>>(context);
  dist::TransferOp::attachInterface<Placement<dist::TransferOp>>(context);
  dist::AllReduceOp::attachInterface<Placement<dist::AllReduceOp>>(context);
}

#include "compiler/Reference/ReferenceInterface.cpp.inc"

} // namespace weft::reference

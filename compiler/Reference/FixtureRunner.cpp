// Fixture helpers: reference.json parsing and prompt/greedy runs through the
// reference interpreter, shared by the interpreter and pass-semantics tests.
#include "compiler/Reference/FixtureRunner.h"

#include "dialects/Weft/IR/WeftOps.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace weft::reference {

namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error readInts(const llvm::json::Object &root, llvm::StringRef key,
                     const std::string &path, std::vector<int32_t> &out) {
  const llvm::json::Array *array = root.getArray(key);
  if (!array)
    return error(path + ": missing array \"" + key + "\"");
  for (const llvm::json::Value &v : *array) {
    std::optional<int64_t> n = v.getAsInteger();
    if (!n || *n < 0 || *n > std::numeric_limits<int32_t>::max())
      return error(path + ": \"" + key + "\" holds a value that is not a token id");
    out.push_back(int32_t(*n));
  }
  return llvm::Error::success();
}

func::FuncOp lookupFunc(ModuleOp module, llvm::StringRef name) {
  return module.lookupSymbol<func::FuncOp>(name);
}

int32_t lastRowArgmax(const Tensor &logits) {
  int64_t vocab = logits.shape[1];
  const float *row = &logits.f[(logits.shape[0] - 1) * vocab];
  int64_t best = 0;
  for (int64_t j = 1; j < vocab; ++j)
    if (row[j] > row[best])
      best = j;
  return int32_t(best);
}

llvm::Error checkLogits(const std::vector<Tensor> &results, size_t tokens,
                        llvm::StringRef funcName) {
  if (results.empty() || results[0].isInt || results[0].shape.size() != 2 ||
      results[0].shape[0] != int64_t(tokens) || results[0].shape[1] == 0)
    return error("@" + funcName + ": first result is not [" +
                 llvm::Twine(tokens) + " x vocab] f32 logits");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<FixtureReference> readFixtureReference(llvm::StringRef dir) {
  std::string path = (dir + "/reference.json").str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return error(path + ": " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return error(path + ": " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  if (!root)
    return error(path + ": expected a JSON object");

  FixtureReference ref;
  if (llvm::Error e = readInts(*root, "prompt_ids", path, ref.promptIds))
    return std::move(e);
  if (llvm::Error e =
          readInts(*root, "greedy_continuation", path, ref.greedyContinuation))
    return std::move(e);
  const llvm::json::Array *rows = root->getArray("logits");
  if (!rows || rows->size() != ref.promptIds.size())
    return error(path + ": \"logits\" must hold one row per prompt token");
  for (const llvm::json::Value &rowValue : *rows) {
    const llvm::json::Array *row = rowValue.getAsArray();
    if (!row || row->empty() ||
        (ref.vocabSize && int64_t(row->size()) != ref.vocabSize))
      return error(path + ": \"logits\" rows must be non-empty and equally long");
    ref.vocabSize = int64_t(row->size());
    for (const llvm::json::Value &v : *row) {
      std::optional<double> x = v.getAsNumber();
      if (!x)
        return error(path + ": \"logits\" holds a non-number");
      ref.logits.push_back(float(*x));
    }
  }
  return ref;
}

double maxRelativeError(llvm::ArrayRef<float> actual,
                        llvm::ArrayRef<float> expected) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (actual.size() != expected.size())
    return kInf;
  double maxDiff = 0.0, maxRef = 0.0;
  for (size_t j = 0; j < actual.size(); ++j) {
    double diff = std::fabs(double(actual[j]) - double(expected[j]));
    if (std::isnan(diff))
      return kInf;
    maxDiff = std::max(maxDiff, diff);
    maxRef = std::max(maxRef, std::fabs(double(expected[j])));
  }
  if (maxRef == 0.0)
    return maxDiff == 0.0 ? 0.0 : kInf;
  return maxDiff / maxRef;
}

llvm::Expected<std::vector<Tensor>> runTokens(Interpreter &interpreter,
                                              func::FuncOp fn,
                                              llvm::ArrayRef<int32_t> ids,
                                              int32_t firstPosition, int32_t slot) {
  std::string name = "@" + fn.getSymName().str();
  FunctionType type = fn.getFunctionType();
  auto isTokenVector = [&](unsigned i) {
    auto t = llvm::dyn_cast<RankedTensorType>(type.getInput(i));
    return t && t.getRank() == 1 && t.getElementType().isInteger(32);
  };
  if (type.getNumInputs() < 4 || !isTokenVector(0) || !isTokenVector(1) ||
      !isTokenVector(2) || !llvm::isa<KvCacheType>(type.getInput(3)))
    return error(name + " does not start with (ids, positions, slots, cache) arguments");

  int64_t tokens = int64_t(ids.size());
  std::vector<int32_t> positions(ids.size()), slots(ids.size(), slot);
  for (size_t t = 0; t < ids.size(); ++t)
    positions[t] = firstPosition + int32_t(t);
  std::vector<Tensor> args;
  args.push_back(Tensor::ints(std::vector<int32_t>(ids.begin(), ids.end())));
  args.push_back(Tensor::ints(std::move(positions)));
  args.push_back(Tensor::ints(std::move(slots)));
  args.push_back(Tensor()); // stands for the cache
  for (unsigned i = 4; i < type.getNumInputs(); ++i) {
    auto t = llvm::dyn_cast<RankedTensorType>(type.getInput(i));
    if (!t || t.getRank() != 1)
      return error(name + ": cannot fill argument " + llvm::Twine(i) +
                   ", which is not a per-token vector");
    if (llvm::isa<IntegerType>(t.getElementType()))
      args.push_back(Tensor::ints({tokens}, std::vector<int32_t>(tokens, 0)));
    else
      args.push_back(Tensor::floats({tokens}));
  }
  return interpreter.run(fn, std::move(args));
}

llvm::Expected<std::vector<float>> runPromptLogits(ModuleOp module,
                                                   const WeightStore &weights,
                                                   llvm::ArrayRef<int32_t> prompt,
                                                   llvm::StringRef funcName) {
  func::FuncOp fn = lookupFunc(module, funcName);
  if (!fn)
    return error("module has no function @" + funcName);
  Interpreter interpreter(weights);
  llvm::Expected<std::vector<Tensor>> results =
      runTokens(interpreter, fn, prompt, /*firstPosition=*/0);
  if (!results)
    return results.takeError();
  if (llvm::Error e = checkLogits(*results, prompt.size(), funcName))
    return std::move(e);
  return std::move((*results)[0].f);
}

llvm::Expected<std::vector<int32_t>>
runGreedy(ModuleOp module, const WeightStore &weights,
          llvm::ArrayRef<int32_t> prompt, int steps, llvm::StringRef prefillFunc,
          llvm::StringRef decodeFunc) {
  func::FuncOp prefill = lookupFunc(module, prefillFunc);
  func::FuncOp decode = lookupFunc(module, decodeFunc);
  if (!prefill || !decode)
    return error("module has no function @" + (prefill ? decodeFunc : prefillFunc));
  if (prompt.empty())
    return error("greedy generation needs a non-empty prompt");
  Interpreter interpreter(weights);
  std::vector<int32_t> generated;
  llvm::Expected<std::vector<Tensor>> results =
      runTokens(interpreter, prefill, prompt, /*firstPosition=*/0);
  if (!results)
    return results.takeError();
  int32_t position = int32_t(prompt.size());
  for (int step = 0; step < steps; ++step) {
    llvm::StringRef fnName = step == 0 ? prefillFunc : decodeFunc;
    size_t tokens = step == 0 ? prompt.size() : 1;
    if (llvm::Error e = checkLogits(*results, tokens, fnName))
      return std::move(e);
    generated.push_back(lastRowArgmax((*results)[0]));
    if (step + 1 == steps)
      break;
    results = runTokens(interpreter, decode, generated.back(), position++);
    if (!results)
      return results.takeError();
  }
  return generated;
}

} // namespace weft::reference

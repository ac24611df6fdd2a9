// A CPU reference interpreter of the `weft` dialect: straightforward f32 loops
// that follow the op descriptions, the oracle for rewrites and kernels.
#ifndef WEFT_COMPILER_REFERENCE_INTERPRETER_H_
#define WEFT_COMPILER_REFERENCE_INTERPRETER_H_

#include "compiler/Import/Checkpoint.h"
#include "dialects/Weft/IR/WeftOps.h"
#include "runtime/io/MappedFile.h"


#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace weft::reference {

// A dense row-major host tensor. Float tensors hold their data in `f` and
// integer tensors in `i`, whatever element type the IR declares: every
// float dtype is computed in f32 and every integer one in i32.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> f;
  std::vector<int32_t> i;
  bool isInt = false;

  static Tensor floats(std::vector<int64_t> shape, std::vector<float> data);
  static Tensor floats(std::vector<int64_t> shape); // zero-filled
  static Tensor ints(std::vector<int64_t> shape, std::vector<int32_t> data);
  // A 1-D i32 tensor, e.g. token ids.
  static Tensor ints(std::vector<int32_t> data);

  int64_t numElements() const;
  size_t dataSize() const { return isInt ? i.size() : f.size(); }
};

// Weights by name, as f32. Checkpoint tensors are decoded on first use and
// kept; tensors added directly (tests, transformed weights) replace any
// checkpoint tensor of the same name. A quantized checkpoint's projection
// ("...q_proj.weight") is decoded from its packed tensors
// (dequantizeProjection). Lookups are safe from several threads.
class WeightStore {
public:
  WeightStore();
  WeightStore(WeightStore &&) noexcept;
  WeightStore &operator=(WeightStore &&) noexcept;
  ~WeightStore();

  // Maps every safetensors file of `checkpoint` (no tensor is decoded yet).
  static llvm::Expected<WeightStore> fromCheckpoint(const Checkpoint &checkpoint);

  void add(std::string name, Tensor tensor);
  bool contains(llvm::StringRef name) const;

  // The tensor called `name`; an error names it when it is missing or its
  // data cannot be decoded.
  llvm::Expected<std::shared_ptr<const Tensor>> get(llvm::StringRef name) const;
  // The 16-bit projection `name` as quantizing it at compile time makes it
  // (quantizeForKernels: `quant`'s bits, groups and format, symmetric for
  // 8-bit integers, scales in the weight's own `dtype`), expanded back to
  // the values the kernels compute with; a projection the checkpoint
  // stores quantized is returned as get() decodes it.
  llvm::Expected<std::shared_ptr<const Tensor>> getQuantized(llvm::StringRef name,
                                                             QuantAttr quant,
                                                             mlir::Type dtype) const;

private:
  struct Source {
    size_t file;
    io::TensorInfo info;
    uint64_t dataOffset; // start of the file's data section
  };
  // The checkpoint tensor `name` decoded (floats, or ints for I32); the
  // caller holds the lock.
  llvm::Expected<Tensor> decode(llvm::StringRef name, const Source &s) const;
  // A quantized projection's "<base>weight", from its packed tensors.
  llvm::Expected<Tensor> dequantize(llvm::StringRef name) const;
  Quantization quant_;
  std::vector<std::unique_ptr<io::MappedFile>> files_;
  std::map<std::string, Source, std::less<>> sources_;
  mutable std::map<std::string, std::shared_ptr<const Tensor>, std::less<>> tensors_;
  std::unique_ptr<std::mutex> mutex_;
};

// The interpreter's model of `!weft.kv_cache`: per (layer, slot, position)
// the rotated key and the value of every KV head, concatenated
// (kv_heads * head_dim floats each).
class KvCache {
public:
  struct Entry {
    std::vector<float> key;
    std::vector<float> value;
  };

  void write(int64_t layer, int32_t slot, int32_t position,
             llvm::ArrayRef<float> key, llvm::ArrayRef<float> value);
  const Entry *find(int64_t layer, int32_t slot, int32_t position) const;
  // The entries of (layer, slot) at positions in [first, last], ascending.
  std::vector<std::pair<int32_t, const Entry *>>
  range(int64_t layer, int32_t slot, int32_t first, int32_t last) const;
  size_t size() const;
  void clear();
  // Every layer's entry at (slot, position), and writing such a set back at
  // another place: a paged cache's block moved between sequences (a test's
  // model of KV pages shared by prefix caching).
  std::vector<std::pair<int64_t, Entry>> at(int32_t slot, int32_t position) const;
  void put(int32_t slot, int32_t position, const std::vector<std::pair<int64_t, Entry>> &entries);

private:
  // Keyed (layer, slot) then position, so a range is one ordered scan.
  std::map<std::pair<int64_t, int32_t>, std::map<int32_t, Entry>> entries_;
};

// Runs functions of the `weft` dialect (plus func.return) on host tensors.
// The KV cache persists across run() calls, so decode steps can follow a
// prefill. Not thread-safe; use one interpreter per thread.
class Interpreter {
public:
  // Uses `cache` when given (it must outlive the interpreter), else a cache
  // of its own.
  explicit Interpreter(const WeightStore &weights, KvCache *cache = nullptr);

  // `args` match the function's arguments one for one; any tensor (e.g. a
  // default-constructed one) stands for a `!weft.kv_cache` argument. Returns
  // the function's results (an empty tensor for a returned cache). Shapes
  // are checked against every static dimension the IR declares.
  llvm::Expected<std::vector<Tensor>> run(mlir::func::FuncOp fn,
                                          std::vector<Tensor> args);

  KvCache &cache() { return *cache_; }
  const KvCache &cache() const { return *cache_; }

private:
  const WeightStore &weights_;
  std::unique_ptr<KvCache> ownedCache_;
  KvCache *cache_;
};

} // namespace weft::reference

#endif // WEFT_COMPILER_REFERENCE_INTERPRETER_H_

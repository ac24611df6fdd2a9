// Compiles emitted kernels with NVRTC (CUBIN for one architecture, plus its
// PTX) and keeps the results in an on-disk cache.
#ifndef WEFT_TARGETS_CUDA_NVRTC_H_
#define WEFT_TARGETS_CUDA_NVRTC_H_

#include "targets/CUDA/KernelEmitter.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace weft::cuda {

struct CompiledKernel {
  std::string name;   // the kernel's name (EmittedKernel::name)
  std::string symbol; // what the binary calls its entry: the lowered name of a
                      // template instance (EmittedKernel::instance), else `name`
  std::string arch;   // "sm_86"
  std::vector<uint8_t> cubin;
  std::string ptx;         // the same code as PTX (for newer architectures)
  uint64_t sourceHash = 0; // kernelSourceHash: the source and the kernel library
  bool fromCache = false;
};

// A directory of compiled kernels, one file per (source, architecture,
// NVRTC version, options). Writes go to a temporary file renamed into
// place, so concurrent compilers (threads or processes) never see a partial
// entry; an entry that does not read back intact is ignored and rebuilt.
class KernelCache {
public:
  explicit KernelCache(std::string directory);

  // $XDG_CACHE_HOME/weft/kernels, else ~/.cache/weft/kernels.
  static std::string defaultDirectory();

  const std::string &directory() const { return directory_; }

  // The entry of `key` if present and intact (its name must match).
  std::optional<CompiledKernel> lookup(uint64_t key, llvm::StringRef name) const;
  llvm::Error store(uint64_t key, const CompiledKernel &kernel) const;
  // Removes every entry (and nothing else) from the directory.
  llvm::Error clear() const;
  // The file that holds `key`.
  std::string entryPath(uint64_t key) const;

private:
  std::string directory_;
};

// "13.0": the NVRTC the library is linked against.
std::string nvrtcVersionString();

// The options compileKernel passes to NVRTC for `arch` (part of the key).
std::vector<std::string> nvrtcOptions(llvm::StringRef arch);

// The hash of what `kernel` compiles from: its source and the kernel
// library it may include (the plan's Kernel.source_hash).
uint64_t kernelSourceHash(const EmittedKernel &kernel);

// The cache key of `kernel` compiled for `arch`: a hash of the source, the
// kernel library, the architecture, the NVRTC version and the options.
uint64_t kernelCacheKey(const EmittedKernel &kernel, llvm::StringRef arch);

// Compiles `kernel` for `arch` ("sm_86", "sm_90", ...), through `cache`
// when given (a failure to write the cache is not an error). Errors are one
// line: "kernel <name> (<arch>): NVRTC compilation failed: <log excerpt>".
llvm::Expected<CompiledKernel> compileKernel(const EmittedKernel &kernel, llvm::StringRef arch,
                                             KernelCache *cache);

// Called after each distinct source is compiled (or found in the cache),
// from the compiling thread, one call at a time: done of total distinct
// sources.
using CompileProgress = std::function<void(size_t done, size_t total)>;

// Compiles a list: kernels with identical sources are compiled once, the
// rest in parallel on up to `threads` threads (0: the hardware's
// concurrency), longest sources first so that no long compile is left to
// run alone at the end. Results are in input order; on failure, the error
// of the first failing kernel in that order. `distinct`, when given,
// receives the number of distinct sources.
llvm::Expected<std::vector<CompiledKernel>>
compileKernels(const std::vector<EmittedKernel> &kernels, llvm::StringRef arch,
               KernelCache *cache, unsigned threads = 0, const CompileProgress &progress = {},
               size_t *distinct = nullptr);

} // namespace weft::cuda

#endif // WEFT_TARGETS_CUDA_NVRTC_H_

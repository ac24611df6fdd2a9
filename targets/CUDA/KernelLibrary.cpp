// The embedded kernel library (see KernelLibrary.h).
#include "targets/CUDA/KernelLibrary.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/xxhash.h"

#include <string>

namespace weft::cuda {
namespace {

const KernelHeader kHeaders[] = {
#include "KernelLibrary.inc"
};

} // namespace

llvm::ArrayRef<KernelHeader> kernelLibrary() { return kHeaders; }

uint64_t kernelLibraryHash() {
  static const uint64_t hash = [] {
    std::string all;
    for (const KernelHeader &h : kHeaders) {
      all += h.name;
      all += '\0';
      all += h.contents;
      all += '\0';
    }
    return llvm::xxh3_64bits(llvm::StringRef(all));
  }();
  return hash;
}

} // namespace weft::cuda

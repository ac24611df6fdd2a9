// The kernel library: Weft's CUDA kernel templates (targets/CUDA/kernels/),
// embedded into the compiler at build time. Generated kernels include them
// by name ("weft/gemv.cuh"); NVRTC receives every one as an in-memory
// header, so the compiler needs no file of its own at run time.
#ifndef WEFT_TARGETS_CUDA_KERNELLIBRARY_H_
#define WEFT_TARGETS_CUDA_KERNELLIBRARY_H_

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace weft::cuda {

struct KernelHeader {
  const char *name;     // include name, e.g. "weft/common.cuh"
  const char *contents; // the file as written
};

// Every header of the library, sorted by name.
llvm::ArrayRef<KernelHeader> kernelLibrary();

// A hash over every header's name and contents: part of each kernel's cache
// key and source hash, so a changed template recompiles what uses it.
uint64_t kernelLibraryHash();

// Overlays the library with the headers in `dir`/weft/*.cuh, for working on
// kernels without rebuilding the compiler (weft-compile --kernel-library):
// a header named like an embedded one replaces it, a new name is added. Call
// it before anything reads the library (the first kernelLibrary() or
// kernelLibraryHash()); returns the number of headers read, or an error
// naming the directory or file that could not be used.
llvm::Expected<int> overlayKernelLibrary(llvm::StringRef dir);

} // namespace weft::cuda

#endif // WEFT_TARGETS_CUDA_KERNELLIBRARY_H_

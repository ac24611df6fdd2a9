// NCCL, loaded at run time (dlopen "libnccl.so.2"): the runtime starts and
// runs single-GPU and peer-copy plans where NCCL is not installed, and uses
// it for tensor-parallel all-reduces when it is.
#ifndef WEFT_RUNTIME_GPU_NCCL_H_
#define WEFT_RUNTIME_GPU_NCCL_H_

#include "runtime/base/Status.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

namespace weft::gpu {

// The few NCCL types the runtime passes through; their values are NCCL's
// stable ABI (nccl.h), so the header is not needed at build time.
using NcclComm = struct ncclComm *;
enum class NcclType : int { F16 = 6, F32 = 7, BF16 = 9 };

class Nccl {
public:
  // Loads libnccl.so.2 once; an error says why it is unavailable.
  static StatusOr<const Nccl *> load();

  // NCCL's version as "2.27.3".
  std::string version() const;

  // One communicator per GPU of `gpus` (distinct GPUs of this process),
  // rank i on gpus[i].
  StatusOr<std::vector<NcclComm>> initAll(const std::vector<int> &gpus) const;
  void destroy(NcclComm comm) const;

  // In-place sum of `count` elements over every rank: buffers[i] on the
  // device of comms[i], enqueued on streams[i], as one NCCL group.
  Status allReduce(const std::vector<void *> &buffers, size_t count, NcclType type,
                   const std::vector<NcclComm> &comms,
                   const std::vector<cudaStream_t> &streams) const;

private:
  Nccl() = default;
  using Result = int;
  Result (*getVersion_)(int *) = nullptr;
  Result (*commInitAll_)(NcclComm *, int, const int *) = nullptr;
  Result (*commDestroy_)(NcclComm) = nullptr;
  Result (*allReduce_)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  Result (*groupStart_)() = nullptr;
  Result (*groupEnd_)() = nullptr;
  const char *(*getErrorString_)(Result) = nullptr;
  Status check(Result r, const std::string &what) const;
};

} // namespace weft::gpu

#endif // WEFT_RUNTIME_GPU_NCCL_H_

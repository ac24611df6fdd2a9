// Row-major C[m, n] = A[m, k] · B[n, k]ᵀ (+ bias[n]) (+ residual[m, n])
// through cuBLASLt, with the algorithm chosen by its heuristic on the GPU
// at hand and cached per shape.
#ifndef WEFT_RUNTIME_GPU_GEMM_H_
#define WEFT_RUNTIME_GPU_GEMM_H_

#include "runtime/base/Status.h"

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace weft::gpu {

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr, *b = nullptr;
  void *c = nullptr;
  const void *bias = nullptr;     // optional
  const void *residual = nullptr; // optional; may equal c
  cudaDataType_t abType = CUDA_R_16F;
  cudaDataType_t cType = CUDA_R_16F;
};

class GemmRunner {
public:
  static StatusOr<std::unique_ptr<GemmRunner>> create(int device, size_t workspaceBytes);
  ~GemmRunner();
  Status run(const GemmArgs &args, cudaStream_t stream);

private:
  GemmRunner() = default;
  void *handle_ = nullptr; // cublasLtHandle_t
  void *workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
  struct Algo;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int, bool, bool>, std::shared_ptr<Algo>>
      algos_;
};

} // namespace weft::gpu

#endif // WEFT_RUNTIME_GPU_GEMM_H_

// cuBLASLt GEMMs for the plan's Gemm steps.
#include "runtime/gpu/Gemm.h"

#include "runtime/gpu/Cuda.h"

#include <cublasLt.h>

namespace weft::gpu {

namespace {

Status lt(cublasStatus_t s, const std::string &what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return internalError("cuBLASLt " + what + ": status " + std::to_string(int(s)));
}

} // namespace

struct GemmRunner::Algo {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Algo() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    for (auto l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
};

StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::create(int device, size_t workspaceBytes) {
  std::unique_ptr<GemmRunner> r(new GemmRunner());
  WEFT_CUDA(cudaSetDevice(device), "cudaSetDevice");
  cublasLtHandle_t h;
  WEFT_RETURN_IF_ERROR(lt(cublasLtCreate(&h), "create"));
  r->handle_ = h;
  r->workspaceBytes_ = workspaceBytes;
  WEFT_CUDA(cudaMalloc(&r->workspace_, workspaceBytes), "cuBLASLt workspace");
  return r;
}

GemmRunner::~GemmRunner() {
  algos_.clear();
  if (workspace_)
    cudaFree(workspace_);
  if (handle_)
    cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

// Row-major C = A·Bᵀ is column-major Cᵀ[n, m] = B[n, k] (as the transposed
// col-major k x n matrix) · Aᵀ (col-major k x m).
Status GemmRunner::run(const GemmArgs &g, cudaStream_t stream) {
  auto key = std::make_tuple(g.m, g.n, g.k, int(g.abType), int(g.cType),
                             g.bias != nullptr, g.residual != nullptr);
  std::shared_ptr<Algo> &slot = algos_[key];
  if (!slot) {
    auto algo = std::make_shared<Algo>();
    WEFT_RETURN_IF_ERROR(lt(cublasLtMatmulDescCreate(&algo->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                            "matmul descriptor"));
    cublasOperation_t transB = CUBLAS_OP_T, transA = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(algo->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transB, sizeof(transB));
    cublasLtMatmulDescSetAttribute(algo->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transA, sizeof(transA));
    if (g.bias) {
      cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      cublasLtMatmulDescSetAttribute(algo->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
      cudaDataType_t biasType = g.abType;
      cublasLtMatmulDescSetAttribute(algo->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                                     sizeof(biasType));
    }
    WEFT_RETURN_IF_ERROR(lt(cublasLtMatrixLayoutCreate(&algo->a, g.abType, uint64_t(g.k),
                                                       uint64_t(g.n), g.k), "layout B"));
    WEFT_RETURN_IF_ERROR(lt(cublasLtMatrixLayoutCreate(&algo->b, g.abType, uint64_t(g.k),
                                                       uint64_t(g.m), g.k), "layout A"));
    cudaDataType_t residualType = g.residual ? g.abType : g.cType;
    WEFT_RETURN_IF_ERROR(lt(cublasLtMatrixLayoutCreate(&algo->c, residualType, uint64_t(g.n),
                                                       uint64_t(g.m), g.n), "layout C"));
    WEFT_RETURN_IF_ERROR(lt(cublasLtMatrixLayoutCreate(&algo->d, g.cType, uint64_t(g.n),
                                                       uint64_t(g.m), g.n), "layout D"));
    cublasLtMatmulPreference_t pref;
    WEFT_RETURN_IF_ERROR(lt(cublasLtMatmulPreferenceCreate(&pref), "preference"));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &workspaceBytes_, sizeof(workspaceBytes_));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
        static_cast<cublasLtHandle_t>(handle_), algo->desc, algo->a, algo->b, algo->c, algo->d,
        pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0)
      return internalError("cuBLASLt has no algorithm for GEMM m=" + std::to_string(g.m) +
                           " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k));
    algo->algo = result.algo;
    slot = algo;
  }
  if (g.bias)
    cublasLtMatmulDescSetAttribute(slot->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                   sizeof(g.bias));
  float alpha = 1.0f, beta = g.residual ? 1.0f : 0.0f;
  const void *c = g.residual ? g.residual : g.c;
  return lt(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), slot->desc, &alpha, g.b,
                           slot->a, g.a, slot->b, &beta, c, slot->c, g.c, slot->d,
                           &slot->algo, workspace_, workspaceBytes_, stream),
            "matmul m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                " k=" + std::to_string(g.k));
}

} // namespace weft::gpu

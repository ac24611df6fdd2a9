// The runtime's access to CUDA: the runtime API for memory and streams, the
// driver API (modules, launches) through cudart's entry-point query so the
// binaries start on machines without a driver, and Status-returning checks.
#ifndef WEFT_RUNTIME_GPU_CUDA_H_
#define WEFT_RUNTIME_GPU_CUDA_H_

#include "runtime/base/Status.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

namespace weft::gpu {

// "what: cudaErrorX (message)" as a Status, OK on success.
Status cudaStatus(cudaError_t error, const std::string &what);
Status driverStatus(CUresult result, const std::string &what);

#define WEFT_CUDA(expr, what) WEFT_RETURN_IF_ERROR(::weft::gpu::cudaStatus((expr), (what)))
#define WEFT_CU(expr, what) WEFT_RETURN_IF_ERROR(::weft::gpu::driverStatus((expr), (what)))

// Driver API entry points the runtime uses.
struct Driver {
  decltype(&cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&cuModuleUnload) moduleUnload = nullptr;
  decltype(&cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&cuLaunchKernel) launchKernel = nullptr;
  decltype(&cuLaunchKernelEx) launchKernelEx = nullptr;
  decltype(&cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&cuFuncGetAttribute) funcGetAttribute = nullptr;
  decltype(&cuGetErrorName) getErrorName = nullptr;
  decltype(&cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy = nullptr;
};

// Resolves the driver entry points once; fails cleanly with no driver.
StatusOr<const Driver *> driver();

// Number of GPUs, or an error saying why there are none.
StatusOr<int> deviceCount();

} // namespace weft::gpu

#endif // WEFT_RUNTIME_GPU_CUDA_H_

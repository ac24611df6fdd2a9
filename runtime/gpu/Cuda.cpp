// CUDA error handling and driver entry points.
#include "runtime/gpu/Cuda.h"

#include <mutex>

namespace weft::gpu {

Status cudaStatus(cudaError_t error, const std::string &what) {
  if (error == cudaSuccess)
    return Status::ok();
  return internalError(what + ": " + cudaGetErrorName(error) + " (" +
                       cudaGetErrorString(error) + ")");
}

Status driverStatus(CUresult result, const std::string &what) {
  if (result == CUDA_SUCCESS)
    return Status::ok();
  const char *name = "CUDA driver error";
  StatusOr<const Driver *> d = driver();
  if (d.isOk() && (*d)->getErrorName)
    (*d)->getErrorName(result, &name);
  return internalError(what + ": " + name + " (" + std::to_string(int(result)) + ")");
}

namespace {

// Why there is no GPU to run on, in words a user acts on: no driver (or one
// too old for this CUDA), or no device at all.
Status noGpu(cudaError_t e) {
  if (e == cudaErrorInsufficientDriver)
    return failedPrecondition(std::string("no NVIDIA GPU found: the NVIDIA driver is missing "
                                          "or older than this build's CUDA needs (") +
                              cudaGetErrorName(e) + ")");
  if (e == cudaErrorNoDevice)
    return failedPrecondition(std::string("no NVIDIA GPU found (") + cudaGetErrorName(e) +
                              "; check CUDA_VISIBLE_DEVICES)");
  return cudaStatus(e, "no usable NVIDIA GPU or driver");
}

template <typename F>
Status resolve(const char *symbol, F &out) {
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult query{};
  cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &fn, 12000,
                                                   cudaEnableDefault, &query);
  if (e != cudaSuccess || query != cudaDriverEntryPointSuccess || !fn)
    return internalError(std::string("CUDA driver entry point ") + symbol +
                         " is unavailable: " +
                         (e != cudaSuccess ? cudaGetErrorString(e) : "not found"));
  out = reinterpret_cast<F>(fn);
  return Status::ok();
}

} // namespace

StatusOr<const Driver *> driver() {
  static Driver d;
  static Status status = [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
      return noGpu(e);
    for (Status s : {resolve("cuModuleLoadData", d.moduleLoadData),
                     resolve("cuModuleUnload", d.moduleUnload),
                     resolve("cuModuleGetFunction", d.moduleGetFunction),
                     resolve("cuLaunchKernel", d.launchKernel),
                     resolve("cuLaunchKernelEx", d.launchKernelEx),
                     resolve("cuFuncSetAttribute", d.funcSetAttribute),
                     resolve("cuFuncGetAttribute", d.funcGetAttribute),
                     resolve("cuGetErrorName", d.getErrorName),
                     resolve("cuOccupancyMaxActiveBlocksPerMultiprocessor", d.occupancy)})
      if (!s.isOk())
        return s;
    return Status::ok();
  }();
  if (!status.isOk())
    return status;
  return &d;
}

StatusOr<int> deviceCount() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return noGpu(e);
  return count;
}

} // namespace weft::gpu

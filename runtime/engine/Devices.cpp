// Setting the plan's devices up on GPUs, allocating within their declared
// memory, and releasing it all when the engine goes.
#include "runtime/engine/Devices.h"

#include <algorithm>
#include <cstdlib>

namespace weft::engine {

namespace fb = ::weft::plan::fb;
using gpu::cudaStatus;

namespace {

constexpr size_t kGemmWorkspace = 32u << 20;

std::string devName(int d) { return "device " + std::to_string(d); }

} // namespace

DeviceSet::~DeviceSet() {
  for (Device &d : devices_) {
    cudaSetDevice(d.gpu);
    for (void *a : d.allocations)
      cudaFree(a);
    d.gemm.reset();
    if (d.done) cudaEventDestroy(d.done);
    if (d.join) cudaEventDestroy(d.join);
    for (cudaEvent_t e : d.stepDone)
      if (e) cudaEventDestroy(e);
    for (void *h : d.hostAllocations)
      cudaFreeHost(h);
    if (d.stream) cudaStreamDestroy(d.stream);
  }
}

StatusOr<void *> DeviceSet::allocate(int index, uint64_t bytes, const std::string &what) {
  Device &d = devices_[size_t(index)];
  bytes = std::max<uint64_t>(bytes, 256);
  if (d.used + bytes > d.capacity)
    return Status(StatusCode::kResourceExhausted,
                  devName(index) + ": " + what + " needs " + std::to_string(bytes) +
                      " bytes but only " + std::to_string(d.capacity - d.used) +
                      " of its declared " + std::to_string(d.capacity) + " remain");
  WEFT_CUDA(cudaSetDevice(d.gpu), "cudaSetDevice");
  void *ptr = nullptr;
  WEFT_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&ptr, bytes),
                                  devName(index) + ": allocating " + what));
  d.used += bytes;
  d.allocations.push_back(ptr);
  return ptr;
}

StatusOr<void *> DeviceSet::allocateHost(int index, uint64_t bytes, const std::string &what) {
  Device &d = devices_[size_t(index)];
  WEFT_CUDA(cudaSetDevice(d.gpu), "cudaSetDevice");
  void *ptr = nullptr;
  WEFT_RETURN_IF_ERROR(cudaStatus(cudaMallocHost(&ptr, std::max<uint64_t>(bytes, 64)),
                                  devName(index) + ": pinning host memory for " + what));
  d.hostAllocations.push_back(ptr);
  return ptr;
}

Status DeviceSet::setUp(const fb::Plan &plan, const EngineOptions &options) {
  StatusOr<int> count = gpu::deviceCount();
  if (!count.isOk())
    return count.status();
  StatusOr<const gpu::Driver *> d = gpu::driver();
  if (!d.isOk())
    return d.status();
  drv_ = *d;
  const auto *declared = plan.topology()->devices();
  size_t n = declared->size();
  if (!options.deviceMap.empty() && options.deviceMap.size() != n)
    return invalidArgument("--devices lists " + std::to_string(options.deviceMap.size()) +
                           " GPUs for a plan of " + std::to_string(n) + " devices");
  devices_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Device &dev = devices_[i];
    dev.gpu = options.deviceMap.empty() ? (int(i) < *count ? int(i) : 0)
                                        : options.deviceMap[i];
    if (dev.gpu < 0 || dev.gpu >= *count)
      return invalidArgument("--devices: GPU " + std::to_string(dev.gpu) +
                             " does not exist (found " + std::to_string(*count) + ")");
    const fb::Device *decl = declared->Get(uint32_t(i));
    cudaDeviceProp prop{};
    WEFT_CUDA(cudaGetDeviceProperties(&prop, dev.gpu), "cudaGetDeviceProperties");
    int cc = prop.major * 10 + prop.minor;
    std::string arch = decl->arch() ? decl->arch()->str() : "";
    int planCc = arch.size() > 3 ? std::atoi(arch.c_str() + 3) : 0;
    if (planCc / 10 > cc / 10 || (planCc / 10 == cc / 10 && planCc > cc))
      return failedPrecondition(devName(int(i)) + " (" + decl->name()->str() +
                                "): the plan's code is for " + arch + " but GPU " +
                                std::to_string(dev.gpu) + " (" + prop.name + ") is sm_" +
                                std::to_string(cc));
    uint64_t declaredBytes = decl->memory_cap_bytes()
                                 ? std::min(decl->memory_bytes(), decl->memory_cap_bytes())
                                 : decl->memory_bytes();
    dev.capacity = std::min<uint64_t>(declaredBytes, prop.totalGlobalMem);
    dev.programmaticLaunch = options.programmaticLaunch && cc >= 90;
    WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaStreamCreateWithFlags(&dev.stream, cudaStreamNonBlocking), "stream");
    WEFT_CUDA(cudaEventCreateWithFlags(&dev.done, cudaEventDisableTiming), "event");
    WEFT_CUDA(cudaEventCreateWithFlags(&dev.join, cudaEventDisableTiming), "event");
    StatusOr<std::unique_ptr<gpu::GemmRunner>> g =
        gpu::GemmRunner::create(dev.gpu, kGemmWorkspace);
    if (!g.isOk())
      return g.status();
    dev.gemm = std::move(g.value());
    dev.used += kGemmWorkspace;
    dev.functions.assign(plan.kernels()->size(), nullptr);
  }
  return Status::ok();
}

} // namespace weft::engine

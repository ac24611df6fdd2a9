// Loading the plan's kernels onto the GPUs that launch them.
#include "runtime/engine/KernelTable.h"

#include <set>
#include <string>

namespace weft::engine {

namespace fb = ::weft::plan::fb;

KernelTable::~KernelTable() {
  if (drv_)
    for (auto &[key, m] : modules_)
      drv_->moduleUnload(m);
}

// Which devices launch each kernel.
Status KernelTable::load(const fb::Plan &plan, const EngineOptions &options,
                         DeviceSet &devices, const Progress &progress) {
  drv_ = devices.driver();
  std::set<std::pair<int, uint32_t>> needed;
  for (const fb::Bucket *b : *plan.buckets())
    for (const fb::Step *s : *b->steps())
      if (const fb::Launch *l = s->op_as_Launch())
        needed.insert({s->device(), l->kernel()});
      else if (const fb::AllReduce *r = s->op_as_AllReduce())
        needed.insert({s->device(), uint32_t(r->accumulate_kernel())});
  size_t done = 0;
  for (auto [device, k] : needed) {
    progress("loading kernels", done++, needed.size());
    Device &dev = devices[size_t(device)];
    const fb::Kernel *kernel = plan.kernels()->Get(k);
    auto it = modules_.find({dev.gpu, int(k)});
    if (it == modules_.end()) {
      cudaDeviceProp prop{};
      WEFT_CUDA(cudaGetDeviceProperties(&prop, dev.gpu), "cudaGetDeviceProperties");
      std::string want = "sm_" + std::to_string(prop.major * 10 + prop.minor);
      const fb::KernelBinary *cubin = nullptr, *ptx = nullptr;
      for (const fb::KernelBinary *bin : *kernel->binaries()) {
        if (bin->arch()->str() == want && bin->cubin() && bin->cubin()->size())
          cubin = bin;
        if (bin->ptx() && bin->ptx()->size())
          ptx = bin;
      }
      std::string image;
      const void *data = nullptr;
      if (cubin) {
        data = cubin->cubin()->data();
      } else if (ptx && options.allowPtxJit) {
        image = ptx->ptx()->str();
        data = image.c_str();
      } else {
        return failedPrecondition("kernel " + kernel->name()->str() + ": no " + want +
                                  " binary in the plan (and PTX JIT is off)");
      }
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaFree(nullptr), "creating the CUDA context");
      CUmodule m;
      WEFT_CU(drv_->moduleLoadData(&m, data), "loading kernel " + kernel->name()->str());
      it = modules_.emplace(std::make_pair(dev.gpu, int(k)), m).first;
    }
    CUfunction fn;
    const std::string what = "kernel " + kernel->name()->str();
    // A library template instance by its lowered symbol; an extern "C"
    // entry by its name.
    const char *symbol = kernel->symbol() ? kernel->symbol()->c_str() : kernel->name()->c_str();
    WEFT_CU(drv_->moduleGetFunction(&fn, it->second, symbol), what);
    // The binary's own limits against the geometry the plan launches it
    // with (every launch uses the kernel's, PlanReader checks): a block the
    // code cannot run, or more shared memory than the GPU gives, is an
    // error here rather than a failed launch mid-step.
    int maxThreads = 0, staticShared = 0;
    WEFT_CU(drv_->funcGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
            what);
    WEFT_CU(drv_->funcGetAttribute(&staticShared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn),
            what);
    const auto *block = kernel->block();
    const int64_t threads = int64_t(block->Get(0)) * block->Get(1) * block->Get(2);
    if (threads > maxThreads)
      return failedPrecondition(what + ": the plan launches it with " +
                                std::to_string(threads) + " threads per block; its binary for " +
                                "GPU " + std::to_string(dev.gpu) + " allows at most " +
                                std::to_string(maxThreads));
    int optin = 0;
    WEFT_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.gpu),
              "cudaDeviceGetAttribute");
    const int dynamicShared = kernel->shared_bytes();
    if (int64_t(staticShared) + dynamicShared > optin)
      return failedPrecondition(what + ": needs " + std::to_string(staticShared) + " + " +
                                std::to_string(dynamicShared) +
                                " bytes of shared memory per block; GPU " +
                                std::to_string(dev.gpu) + " gives at most " +
                                std::to_string(optin));
    // Beyond 48 KiB per block, static and dynamic together, a launch needs
    // the kernel's opt-in to more dynamic shared memory.
    if (int64_t(staticShared) + dynamicShared > 48 * 1024)
      WEFT_CU(drv_->funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     dynamicShared),
              what);
    // A cooperative kernel's blocks wait on each other: the whole grid must
    // be resident at once on this GPU.
    if (kernel->cooperative()) {
      int perSm = 0, sms = 0;
      WEFT_CU(drv_->occupancy(&perSm, fn, int(threads), size_t(dynamicShared)), what);
      WEFT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev.gpu),
                "cudaDeviceGetAttribute");
      const auto *grid = kernel->grid();
      const int64_t blocks = int64_t(grid->Get(0)) * grid->Get(1) * grid->Get(2);
      if (blocks > int64_t(perSm) * sms)
        return failedPrecondition(what + ": its " + std::to_string(blocks) +
                                  " blocks must all be resident at once; GPU " +
                                  std::to_string(dev.gpu) + " holds " + std::to_string(perSm) +
                                  " per SM on " + std::to_string(sms) +
                                  " SMs (compile the plan for this GPU)");
    }
    dev.functions[k] = fn;
  }
  progress("loading kernels", needed.size(), needed.size());
  return Status::ok();
}

} // namespace weft::engine

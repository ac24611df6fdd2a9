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
    WEFT_CU(drv_->moduleGetFunction(&fn, it->second, kernel->name()->c_str()),
            "kernel " + kernel->name()->str());
    dev.functions[k] = fn;
  }
  progress("loading kernels", needed.size(), needed.size());
  return Status::ok();
}

} // namespace weft::engine

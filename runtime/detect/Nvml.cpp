// NVML through dlopen.
#include "runtime/detect/Nvml.h"

#include <dlfcn.h>

namespace weft::detect {

struct Nvml::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char *(*errorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driverVersion)(char *, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned *) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *) = nullptr;
  nvmlReturn_t (*cc)(nvmlDevice_t, int *, int *) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *) = nullptr;
  nvmlReturn_t (*pcieGen)(nvmlDevice_t, unsigned *) = nullptr;
  nvmlReturn_t (*pcieWidth)(nvmlDevice_t, unsigned *) = nullptr;
  nvmlReturn_t (*maxClock)(nvmlDevice_t, unsigned, unsigned *) = nullptr;
  nvmlReturn_t (*busWidth)(nvmlDevice_t, unsigned *) = nullptr;
  nvmlReturn_t (*cores)(nvmlDevice_t, unsigned *) = nullptr;
  nvmlReturn_t (*display)(nvmlDevice_t, nvmlEnableState_t *) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, nvmlEnableState_t *) = nullptr;
  nvmlReturn_t (*linkVersion)(nvmlDevice_t, unsigned, unsigned *) = nullptr;
  nvmlReturn_t (*linkRemote)(nvmlDevice_t, unsigned, nvmlPciInfo_t *) = nullptr;
  nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, int, int *) = nullptr;
};

namespace {

template <typename F> void bind(void *lib, const char *symbol, F &out) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
}

} // namespace

StatusOr<std::unique_ptr<Nvml>> Nvml::load(const std::string &path) {
  std::unique_ptr<Nvml> n(new Nvml());
  std::string tried;
  for (const std::string &p : path.empty()
                                  ? std::initializer_list<std::string>{"libnvidia-ml.so.1",
                                                                       "libnvidia-ml.so"}
                                  : std::initializer_list<std::string>{path}) {
    n->lib_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (n->lib_) {
      n->path_ = p;
      break;
    }
    const char *why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : p.c_str());
  }
  if (!n->lib_)
    return failedPrecondition("cannot load NVML (" + tried +
                              "): is the NVIDIA driver installed? (NVML ships with it)");
  n->api_ = std::make_unique<Api>();
  Api &a = *n->api_;
  bind(n->lib_, "nvmlInit_v2", a.init);
  bind(n->lib_, "nvmlShutdown", a.shutdown);
  bind(n->lib_, "nvmlErrorString", a.errorString);
  bind(n->lib_, "nvmlSystemGetDriverVersion", a.driverVersion);
  bind(n->lib_, "nvmlDeviceGetCount_v2", a.count);
  bind(n->lib_, "nvmlDeviceGetHandleByIndex_v2", a.handle);
  bind(n->lib_, "nvmlDeviceGetName", a.name);
  bind(n->lib_, "nvmlDeviceGetMemoryInfo", a.memory);
  bind(n->lib_, "nvmlDeviceGetCudaComputeCapability", a.cc);
  bind(n->lib_, "nvmlDeviceGetPciInfo_v3", a.pci);
  bind(n->lib_, "nvmlDeviceGetMaxPcieLinkGeneration", a.pcieGen);
  bind(n->lib_, "nvmlDeviceGetMaxPcieLinkWidth", a.pcieWidth);
  bind(n->lib_, "nvmlDeviceGetMaxClockInfo", a.maxClock);
  bind(n->lib_, "nvmlDeviceGetMemoryBusWidth", a.busWidth);
  bind(n->lib_, "nvmlDeviceGetNumGpuCores", a.cores);
  bind(n->lib_, "nvmlDeviceGetDisplayActive", a.display);
  bind(n->lib_, "nvmlDeviceGetNvLinkState", a.linkState);
  bind(n->lib_, "nvmlDeviceGetNvLinkVersion", a.linkVersion);
  bind(n->lib_, "nvmlDeviceGetNvLinkRemotePciInfo_v2", a.linkRemote);
  bind(n->lib_, "nvmlDeviceGetP2PStatus", a.p2p);
  // Without these nothing can be detected: a library this old is not one
  // the CUDA 13 driver ships.
  if (!a.init || !a.shutdown || !a.count || !a.handle || !a.name || !a.memory || !a.cc)
    return failedPrecondition(n->path_ + " lacks nvmlInit_v2/nvmlDeviceGetCount_v2/"
                              "nvmlDeviceGetCudaComputeCapability: the NVIDIA driver is too old");
  if (nvmlReturn_t r = a.init(); r != kNvmlSuccess) {
    Status s = failedPrecondition("NVML could not start (" + n->errorString(r) +
                                  "): is the NVIDIA driver loaded? (nvidia-smi should work)");
    a.shutdown = nullptr; // never initialised
    return s;
  }
  return n;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown)
    api_->shutdown();
  if (lib_)
    dlclose(lib_);
}

std::string Nvml::errorString(nvmlReturn_t r) const {
  if (r == kNvmlErrorFunctionNotFound && api_)
    return "not available in this NVML";
  if (api_ && api_->errorString)
    if (const char *s = api_->errorString(r))
      return std::string(s) + " (" + std::to_string(r) + ")";
  return "NVML error " + std::to_string(r);
}

// Calls `fn` when the library has it.
#define WEFT_NVML_CALL(fn, ...) \
  (api_->fn ? api_->fn(__VA_ARGS__) : kNvmlErrorFunctionNotFound)

nvmlReturn_t Nvml::driverVersion(std::string &out) const {
  char buf[96] = {};
  nvmlReturn_t r = WEFT_NVML_CALL(driverVersion, buf, unsigned(sizeof buf - 1));
  out = r == kNvmlSuccess ? std::string(buf) : std::string();
  return r;
}
nvmlReturn_t Nvml::deviceCount(unsigned &out) const { return WEFT_NVML_CALL(count, &out); }
nvmlReturn_t Nvml::handle(unsigned index, nvmlDevice_t &out) const {
  return WEFT_NVML_CALL(handle, index, &out);
}
nvmlReturn_t Nvml::name(nvmlDevice_t d, std::string &out) const {
  char buf[96] = {}; // NVML_DEVICE_NAME_V2_BUFFER_SIZE
  nvmlReturn_t r = WEFT_NVML_CALL(name, d, buf, unsigned(sizeof buf - 1));
  out = r == kNvmlSuccess ? std::string(buf) : std::string();
  return r;
}
nvmlReturn_t Nvml::memory(nvmlDevice_t d, nvmlMemory_t &out) const {
  return WEFT_NVML_CALL(memory, d, &out);
}
nvmlReturn_t Nvml::computeCapability(nvmlDevice_t d, int &major, int &minor) const {
  return WEFT_NVML_CALL(cc, d, &major, &minor);
}
nvmlReturn_t Nvml::pciInfo(nvmlDevice_t d, nvmlPciInfo_t &out) const {
  out = {};
  return WEFT_NVML_CALL(pci, d, &out);
}
nvmlReturn_t Nvml::maxPcieGeneration(nvmlDevice_t d, unsigned &out) const {
  return WEFT_NVML_CALL(pcieGen, d, &out);
}
nvmlReturn_t Nvml::maxPcieWidth(nvmlDevice_t d, unsigned &out) const {
  return WEFT_NVML_CALL(pcieWidth, d, &out);
}
nvmlReturn_t Nvml::maxClockMHz(nvmlDevice_t d, unsigned clock, unsigned &out) const {
  return WEFT_NVML_CALL(maxClock, d, clock, &out);
}
nvmlReturn_t Nvml::memoryBusWidth(nvmlDevice_t d, unsigned &out) const {
  return WEFT_NVML_CALL(busWidth, d, &out);
}
nvmlReturn_t Nvml::cudaCores(nvmlDevice_t d, unsigned &out) const {
  return WEFT_NVML_CALL(cores, d, &out);
}
nvmlReturn_t Nvml::displayActive(nvmlDevice_t d, nvmlEnableState_t &out) const {
  return WEFT_NVML_CALL(display, d, &out);
}
nvmlReturn_t Nvml::nvLinkState(nvmlDevice_t d, unsigned link, nvmlEnableState_t &out) const {
  return WEFT_NVML_CALL(linkState, d, link, &out);
}
nvmlReturn_t Nvml::nvLinkVersion(nvmlDevice_t d, unsigned link, unsigned &out) const {
  return WEFT_NVML_CALL(linkVersion, d, link, &out);
}
nvmlReturn_t Nvml::nvLinkRemotePci(nvmlDevice_t d, unsigned link, nvmlPciInfo_t &out) const {
  out = {};
  return WEFT_NVML_CALL(linkRemote, d, link, &out);
}
nvmlReturn_t Nvml::p2pReadStatus(nvmlDevice_t a, nvmlDevice_t b, int &out) const {
  return WEFT_NVML_CALL(p2p, a, b, kNvmlP2PCapsRead, &out);
}

#undef WEFT_NVML_CALL

} // namespace weft::detect

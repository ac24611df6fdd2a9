// NVML (the NVIDIA Management Library), loaded at run time with dlopen like
// the CUDA driver, so that tools start on machines without a driver and
// tests can substitute a fake library. Only the calls topology detection
// needs; the types are declared here because the CUDA toolkit does not ship
// nvml.h (they mirror the layouts NVML documents).
#ifndef WEFT_RUNTIME_DETECT_NVML_H_
#define WEFT_RUNTIME_DETECT_NVML_H_

#include "runtime/base/Status.h"

#include <memory>
#include <string>

namespace weft::detect {

using nvmlReturn_t = int;      // NVML_SUCCESS = 0
using nvmlDevice_t = struct nvmlDevice_st *;
using nvmlEnableState_t = int; // 0 disabled, 1 enabled

inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlErrorNotFound = 6;
inline constexpr nvmlReturn_t kNvmlErrorFunctionNotFound = 13; // our own use: symbol missing
inline constexpr unsigned kNvmlMaxNvLinks = 18;           // NVML_NVLINK_MAX_LINKS
inline constexpr unsigned kNvmlClockSm = 1, kNvmlClockMem = 2;
inline constexpr int kNvmlP2PCapsRead = 0, kNvmlP2PStatusOk = 0;

struct nvmlMemory_t {
  unsigned long long total, free, used;
};

struct nvmlPciInfo_t {   // nvmlPciInfo_st as of NVML's _v3 calls
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];        // "00000000:01:00.0"
};

// The loaded library. Every call returns NVML's code; the ones a library
// lacks (an old driver) return kNvmlErrorFunctionNotFound.
class Nvml {
public:
  // Loads `path` (default "libnvidia-ml.so.1", then "libnvidia-ml.so") and
  // calls nvmlInit_v2. Errors say what to do: no driver, an old driver.
  static StatusOr<std::unique_ptr<Nvml>> load(const std::string &path = "");
  ~Nvml(); // nvmlShutdown, dlclose
  Nvml(const Nvml &) = delete;
  Nvml &operator=(const Nvml &) = delete;

  std::string errorString(nvmlReturn_t r) const;
  const std::string &path() const { return path_; }

  nvmlReturn_t driverVersion(std::string &out) const;
  nvmlReturn_t deviceCount(unsigned &out) const;
  nvmlReturn_t handle(unsigned index, nvmlDevice_t &out) const;
  nvmlReturn_t name(nvmlDevice_t d, std::string &out) const;
  nvmlReturn_t memory(nvmlDevice_t d, nvmlMemory_t &out) const;
  nvmlReturn_t computeCapability(nvmlDevice_t d, int &major, int &minor) const;
  nvmlReturn_t pciInfo(nvmlDevice_t d, nvmlPciInfo_t &out) const;
  nvmlReturn_t maxPcieGeneration(nvmlDevice_t d, unsigned &out) const;
  nvmlReturn_t maxPcieWidth(nvmlDevice_t d, unsigned &out) const;
  nvmlReturn_t maxClockMHz(nvmlDevice_t d, unsigned clock, unsigned &out) const;
  nvmlReturn_t memoryBusWidth(nvmlDevice_t d, unsigned &out) const;
  nvmlReturn_t cudaCores(nvmlDevice_t d, unsigned &out) const;
  nvmlReturn_t displayActive(nvmlDevice_t d, nvmlEnableState_t &out) const;
  nvmlReturn_t nvLinkState(nvmlDevice_t d, unsigned link, nvmlEnableState_t &out) const;
  nvmlReturn_t nvLinkVersion(nvmlDevice_t d, unsigned link, unsigned &out) const;
  nvmlReturn_t nvLinkRemotePci(nvmlDevice_t d, unsigned link, nvmlPciInfo_t &out) const;
  nvmlReturn_t p2pReadStatus(nvmlDevice_t a, nvmlDevice_t b, int &out) const;

  struct Api; // the resolved entry points

private:
  Nvml() = default;
  void *lib_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string path_;
};

} // namespace weft::detect

#endif // WEFT_RUNTIME_DETECT_NVML_H_

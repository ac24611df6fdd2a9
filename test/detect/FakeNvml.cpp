// A stand-in for libnvidia-ml.so: the NVML calls weft-detect makes, answered
// from a JSON description of a machine named by $WEFT_FAKE_NVML, so that
// detection is tested on boxes we do not have (boxes/*.json).
//
//   {"init": 0, "driver": "560.35.03",
//    "gpus": [{"name": "NVIDIA GeForce RTX 3090", "bus_id": "00000000:01:00.0",
//              "memory_mib": 24576, "used_mib": 0, "cc": [8, 6], "pcie": [4, 16],
//              "clocks_mhz": [2100, 9751], "bus_width": 384, "cores": 10496,
//              "display": false,
//              "nvlinks": [{"version": 3, "remote": "00000000:02:00.0"}],
//              "unsupported": ["clocks", "cores", "bus_width", "pcie", "display"]}],
//    "p2p": [[0, 1]]}
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

using json = nlohmann::json;
constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3;

json &machine() {
  static json m = [] {
    const char *path = std::getenv("WEFT_FAKE_NVML");
    if (!path)
      return json{{"init", 9}}; // NVML_ERROR_DRIVER_NOT_LOADED
    std::ifstream in(path);
    return json::parse(in, nullptr, /*allow_exceptions=*/false);
  }();
  return m;
}

bool initialised = false;

const json *gpu(void *handle) {
  size_t i = reinterpret_cast<size_t>(handle);
  const json &gpus = machine()["gpus"];
  if (!initialised || i == 0 || i > gpus.size())
    return nullptr;
  return &gpus[i - 1];
}

bool unsupported(const json &g, const char *what) {
  if (!g.contains("unsupported"))
    return false;
  for (const json &u : g["unsupported"])
    if (u == what)
      return true;
  return false;
}

// Answers a query about one GPU: not supported when its description lists
// `what` as unsupported, else `fill` sets the result from the description.
template <typename F> int answer(void *handle, const char *what, F fill) {
  const json *g = gpu(handle);
  if (!g)
    return kInvalidArgument;
  if (unsupported(*g, what))
    return kNotSupported;
  fill(*g);
  return kSuccess;
}

int copyString(const std::string &s, char *out, unsigned length) {
  if (!out || length <= s.size())
    return 7; // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(out, s.c_str(), s.size() + 1);
  return kSuccess;
}

struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

int fillPci(const std::string &busId, PciInfo *out) {
  if (!out)
    return kInvalidArgument;
  std::memset(out, 0, sizeof *out);
  std::strncpy(out->busId, busId.c_str(), sizeof out->busId - 1);
  return kSuccess;
}

} // namespace

extern "C" {

int nvmlInit_v2() {
  const json &m = machine();
  if (m.is_discarded())
    return 999; // NVML_ERROR_UNKNOWN
  int r = m.value("init", 0);
  initialised = r == kSuccess;
  return r;
}
int nvmlShutdown() {
  initialised = false;
  return kSuccess;
}
const char *nvmlErrorString(int r) {
  switch (r) {
  case 0: return "Success";
  case 1: return "Uninitialized";
  case 3: return "Not Supported";
  case 9: return "Driver Not Loaded";
  case 18: return "RM has detected an NVML/RM version mismatch.";
  default: return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char *version, unsigned length) {
  return copyString(machine().value("driver", "560.35.03"), version, length);
}
int nvmlDeviceGetCount_v2(unsigned *count) {
  if (!initialised)
    return kUninitialized;
  *count = unsigned(machine()["gpus"].size());
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **device) {
  if (!initialised)
    return kUninitialized;
  if (index >= machine()["gpus"].size())
    return kInvalidArgument;
  *device = reinterpret_cast<void *>(size_t(index) + 1);
  return kSuccess;
}
int nvmlDeviceGetName(void *d, char *name, unsigned length) {
  const json *g = gpu(d);
  return g ? copyString((*g)["name"].get<std::string>(), name, length) : kInvalidArgument;
}
int nvmlDeviceGetMemoryInfo(void *d, unsigned long long *memory /* total, free, used */) {
  const json *g = gpu(d);
  if (!g)
    return kInvalidArgument;
  unsigned long long total = (*g)["memory_mib"].get<unsigned long long>() << 20;
  unsigned long long used = g->value("used_mib", 0ull) << 20;
  memory[0] = total;
  memory[1] = total - used;
  memory[2] = used;
  return kSuccess;
}
int nvmlDeviceGetCudaComputeCapability(void *d, int *major, int *minor) {
  const json *g = gpu(d);
  if (!g)
    return kInvalidArgument;
  *major = (*g)["cc"][0];
  *minor = (*g)["cc"][1];
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void *d, PciInfo *pci) {
  const json *g = gpu(d);
  return g ? fillPci(g->value("bus_id", ""), pci) : kInvalidArgument;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void *d, unsigned *v) {
  return answer(d, "pcie", [&](const json &g) { *v = g["pcie"][0]; });
}
int nvmlDeviceGetMaxPcieLinkWidth(void *d, unsigned *v) {
  return answer(d, "pcie", [&](const json &g) { *v = g["pcie"][1]; });
}
int nvmlDeviceGetMaxClockInfo(void *d, unsigned type, unsigned *mhz) {
  if (type != 1 && type != 2) // NVML_CLOCK_SM, NVML_CLOCK_MEM
    return kInvalidArgument;
  return answer(d, "clocks", [&](const json &g) { *mhz = g["clocks_mhz"][type == 1 ? 0 : 1]; });
}
int nvmlDeviceGetMemoryBusWidth(void *d, unsigned *bits) {
  return answer(d, "bus_width", [&](const json &g) { *bits = g["bus_width"]; });
}
int nvmlDeviceGetNumGpuCores(void *d, unsigned *cores) {
  return answer(d, "cores", [&](const json &g) { *cores = g["cores"]; });
}
int nvmlDeviceGetDisplayActive(void *d, int *active) {
  return answer(d, "display", [&](const json &g) { *active = g.value("display", false) ? 1 : 0; });
}
int nvmlDeviceGetNvLinkState(void *d, unsigned link, int *active) {
  const json *g = gpu(d);
  if (!g)
    return kInvalidArgument;
  if (!g->contains("nvlinks"))
    return kNotSupported;
  *active = link < (*g)["nvlinks"].size() ? 1 : 0;
  return kSuccess;
}
int nvmlDeviceGetNvLinkVersion(void *d, unsigned link, unsigned *version) {
  const json *g = gpu(d);
  if (!g || !g->contains("nvlinks") || link >= (*g)["nvlinks"].size())
    return kInvalidArgument;
  *version = (*g)["nvlinks"][link]["version"];
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *d, unsigned link, PciInfo *pci) {
  const json *g = gpu(d);
  if (!g || !g->contains("nvlinks") || link >= (*g)["nvlinks"].size())
    return kInvalidArgument;
  return fillPci((*g)["nvlinks"][link]["remote"].get<std::string>(), pci);
}
int nvmlDeviceGetP2PStatus(void *a, void *b, int /*caps*/, int *status) {
  const json *ga = gpu(a), *gb = gpu(b);
  if (!ga || !gb)
    return kInvalidArgument;
  size_t i = reinterpret_cast<size_t>(a) - 1, j = reinterpret_cast<size_t>(b) - 1;
  *status = 4; // NVML_P2P_STATUS_NOT_SUPPORTED
  if (machine().contains("p2p"))
    for (const json &p : machine()["p2p"])
      if ((p[0] == i && p[1] == j) || (p[0] == j && p[1] == i))
        *status = 0;
  return kSuccess;
}

} // extern "C"

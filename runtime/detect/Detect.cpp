// Topology detection through NVML and the topology JSON it becomes.
#include "runtime/detect/Detect.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace weft::detect {
namespace {

constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

std::string lower(std::string s) {
  for (char &c : s)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trimmed(const std::string &s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// The part's name without the vendor prefix older drivers omit.
std::string partName(const std::string &nvmlName) {
  std::string n = lower(trimmed(nvmlName));
  if (n.rfind("nvidia ", 0) == 0)
    n = n.substr(7);
  return n;
}

struct KnownPart {
  const char *name;      // partName() of what NVML reports
  const char *builtin;   // database key
  double minGiB, maxGiB; // memory range that tells variants apart
};

// NVML's names of the parts in Weft's database (targets/Hardware/
// BuiltinDevices.cpp). Exact names only: "RTX 3090" must not match "RTX 3090
// Ti", which is another part.
const KnownPart kKnownParts[] = {
    {"geforce rtx 3060", "rtx3060-12g", 11, 13},
    {"geforce rtx 3080", "rtx3080", 9, 11},
    {"geforce rtx 3080 ti", "rtx3080ti", 11, 13},
    {"geforce rtx 3090", "rtx3090", 23, 25},
    {"geforce rtx 4060 ti", "rtx4060ti-16g", 15, 17},
    {"geforce rtx 4070 ti super", "rtx4070ti-super", 15, 17},
    {"geforce rtx 4080", "rtx4080", 15, 17},
    {"geforce rtx 4090", "rtx4090", 23, 25},
    {"rtx a4000", "rtx-a4000", 15, 17},
    {"rtx a5000", "rtx-a5000", 23, 25},
    {"rtx a6000", "rtx-a6000", 47, 49},
    {"l4", "l4", 21, 25},
    {"l40s", "l40s", 44, 49},
    {"a100-sxm4-40gb", "a100-40g", 38, 41},
    {"a100-sxm4-80gb", "a100-80g", 78, 81},
    {"h100 80gb hbm3", "h100-sxm", 78, 81},
    {"h100 pcie", "h100-pcie", 78, 81},
    {"h200", "h200", 139, 142},
    {"orin (nvgpu)", "jetson-agx-orin-64g", 48, 65},
};

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(GiB));
  return buf;
}

// Rounds for a readable file: 4 significant digits are more than any of
// these figures is known to.
double readable(double v) {
  if (v <= 0)
    return 0;
  double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

// A database-style name for a part Weft does not know: "NVIDIA GeForce RTX
// 5090" -> "rtx-5090". Letters, digits, '.', '_', '-'; at most 64.
std::string deviceName(const std::string &nvmlName) {
  std::string n = partName(nvmlName);
  if (n.rfind("geforce ", 0) == 0)
    n = n.substr(8);
  std::string out;
  for (char c : n) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_')
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-')
    out.pop_back();
  if (out.empty())
    out = "gpu";
  return out.substr(0, 64);
}

// Per-SM per-clock dense tensor rates (FP32 accumulate) of a generation,
// from its whitepapers: GeForce parts run FP16 with FP32 accumulate at half
// the rate of the professional ones of the same chip.
struct SmRates {
  double fp16, fp8, int8;
};
SmRates smRates(int cc, bool geforce) {
  if (cc >= 120) // consumer Blackwell: Ada's rates per SM
    return {geforce ? 512.0 : 1024.0, geforce ? 1024.0 : 2048.0, 2048};
  if (cc >= 100)
    return {8192, 16384, 16384};
  if (cc >= 90)
    return {4096, 8192, 8192};
  if (cc == 80)
    return {2048, 0, 4096};
  if (cc >= 89)
    return {geforce ? 512.0 : 1024.0, geforce ? 1024.0 : 2048.0, 2048};
  if (cc >= 86)
    return {geforce ? 512.0 : 1024.0, 0, 2048};
  return {0, 0, 0};
}
int coresPerSm(int cc) { return cc == 80 ? 64 : cc >= 86 ? 128 : 64; }

} // namespace

std::string builtinDeviceFor(const std::string &nvmlName, uint64_t memoryBytes) {
  std::string n = partName(nvmlName);
  double memGiB = double(memoryBytes) / double(GiB);
  for (const KnownPart &p : kKnownParts)
    if (n == p.name && (memoryBytes == 0 || (memGiB >= p.minGiB && memGiB <= p.maxGiB)))
      return p.builtin;
  return "";
}

std::vector<std::string> knownBuiltinKeys() {
  std::vector<std::string> keys;
  for (const KnownPart &p : kKnownParts)
    keys.push_back(p.builtin);
  return keys;
}

double pcieBandwidth(unsigned generation, unsigned width) {
  // Raw GB/s per lane after line coding (PCI-SIG): 8b/10b up to 2.0,
  // 128b/130b from 3.0.
  static const double perLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.877};
  if (generation == 0 || width == 0)
    return 0;
  double lane = generation < 7 ? perLane[generation] : perLane[6];
  // The fraction of the raw rate a GPU copy reaches: 25 GB/s on 4.0 x16
  // (docs/topology.md).
  const double efficiency = 25.0 / (16 * 1.969);
  return lane * width * efficiency * 1e9;
}

double nvLinkBandwidthPerLink(unsigned version, int cc) {
  if (version == 0)
    return 0;
  if (cc == 86)    // GA102 bridge (RTX 3090, RTX A6000): 4 links, 56.25 GB/s
    return 14.0625e9;
  if (version >= 5) // Blackwell: 18 links, 900 GB/s per direction
    return 50e9;
  return 25e9;      // NVLink 2-4: 25 GB/s per link per direction
}

uint64_t readHostRamBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:")
      return kib * 1024;
  return 0;
}

StatusOr<Detection> detect(const Nvml &nvml, uint64_t hostRamBytes) {
  Detection d;
  d.hostRamBytes = hostRamBytes;
  if (nvml.driverVersion(d.driverVersion) != kNvmlSuccess)
    d.driverVersion.clear();
  unsigned count = 0;
  if (nvmlReturn_t r = nvml.deviceCount(count); r != kNvmlSuccess)
    return failedPrecondition("NVML cannot count the GPUs: " + nvml.errorString(r));
  if (count == 0)
    return failedPrecondition("no NVIDIA GPU found (NVML reports none)");
  if (count > 64)
    return failedPrecondition("NVML reports " + std::to_string(count) +
                              " GPUs; a topology holds at most 64");

  std::vector<nvmlDevice_t> handles(count);
  std::map<std::string, int> byBus; // lower-case bus id -> index
  for (unsigned i = 0; i < count; ++i) {
    std::string where = "GPU " + std::to_string(i);
    if (nvmlReturn_t r = nvml.handle(i, handles[i]); r != kNvmlSuccess)
      return failedPrecondition(where + ": NVML cannot open it: " + nvml.errorString(r));
    nvmlDevice_t h = handles[i];
    DetectedGpu g;
    if (nvmlReturn_t r = nvml.name(h, g.name); r != kNvmlSuccess || g.name.empty())
      return failedPrecondition(where + ": NVML gives no name: " + nvml.errorString(r));
    where += " (" + g.name + ")";
    nvmlMemory_t mem{};
    if (nvmlReturn_t r = nvml.memory(h, mem); r != kNvmlSuccess || mem.total == 0)
      return failedPrecondition(where + ": NVML gives no memory size: " +
                                nvml.errorString(r));
    g.memoryBytes = mem.total;
    g.memoryUsedBytes = std::min(mem.used, mem.total);
    int major = 0, minor = 0;
    if (nvmlReturn_t r = nvml.computeCapability(h, major, minor);
        r != kNvmlSuccess || major <= 0 || major > 99 || minor < 0 || minor > 9)
      return failedPrecondition(where + ": NVML gives no compute capability: " +
                                nvml.errorString(r));
    g.computeCapability = major * 10 + minor;
    nvmlPciInfo_t pci{};
    if (nvml.pciInfo(h, pci) == kNvmlSuccess) {
      pci.busId[sizeof pci.busId - 1] = '\0';
      g.busId = pci.busId;
      if (!g.busId.empty())
        byBus[lower(g.busId)] = int(i);
    }
    // Unknown stays 0 where a part or driver does not answer.
    auto ask = [&](nvmlReturn_t r, unsigned &v) {
      if (r != kNvmlSuccess)
        v = 0;
    };
    ask(nvml.maxPcieGeneration(h, g.pcieGeneration), g.pcieGeneration);
    ask(nvml.maxPcieWidth(h, g.pcieWidth), g.pcieWidth);
    ask(nvml.maxClockMHz(h, kNvmlClockSm, g.smClockMHz), g.smClockMHz);
    ask(nvml.maxClockMHz(h, kNvmlClockMem, g.memClockMHz), g.memClockMHz);
    ask(nvml.memoryBusWidth(h, g.busWidthBits), g.busWidthBits);
    ask(nvml.cudaCores(h, g.cudaCores), g.cudaCores);
    nvmlEnableState_t display = 0;
    g.displayActive = nvml.displayActive(h, display) == kNvmlSuccess && display == 1;
    g.builtin = builtinDeviceFor(g.name, g.memoryBytes);
    d.gpus.push_back(std::move(g));
  }

  // NVLink: each active link ends at another GPU or at an NVSwitch.
  std::map<std::pair<int, int>, DetectedNvLink> direct;
  for (unsigned i = 0; i < count; ++i) {
    DetectedGpu &g = d.gpus[i];
    for (unsigned link = 0; link < kNvmlMaxNvLinks; ++link) {
      nvmlEnableState_t active = 0;
      if (nvml.nvLinkState(handles[i], link, active) != kNvmlSuccess || active != 1)
        continue;
      unsigned version = 0;
      if (nvml.nvLinkVersion(handles[i], link, version) == kNvmlSuccess)
        g.nvLinkVersion = std::max(g.nvLinkVersion, version);
      nvmlPciInfo_t remote{};
      if (nvml.nvLinkRemotePci(handles[i], link, remote) != kNvmlSuccess)
        continue;
      remote.busId[sizeof remote.busId - 1] = '\0';
      auto peer = byBus.find(lower(remote.busId));
      if (peer == byBus.end()) {
        ++g.nvSwitchLinks; // not a GPU of this box: a switch
        continue;
      }
      if (peer->second == int(i))
        continue;
      // Count each link once, from the lower index.
      if (int(i) < peer->second) {
        DetectedNvLink &l = direct[{int(i), peer->second}];
        l.a = int(i);
        l.b = peer->second;
        ++l.links;
        l.version = std::max(l.version, version);
      }
    }
  }
  for (auto &[pair, link] : direct)
    d.nvlinks.push_back(link);
  // GPUs on NVSwitches reach every other one at the rate of the fewer links.
  for (unsigned i = 0; i < count; ++i)
    for (unsigned j = i + 1; j < count; ++j) {
      const DetectedGpu &a = d.gpus[i], &b = d.gpus[j];
      if (!a.nvSwitchLinks || !b.nvSwitchLinks || direct.count({int(i), int(j)}))
        continue;
      DetectedNvLink l;
      l.a = int(i);
      l.b = int(j);
      l.links = std::min(a.nvSwitchLinks, b.nvSwitchLinks);
      l.version = std::min(a.nvLinkVersion, b.nvLinkVersion);
      l.viaSwitch = true;
      d.nvlinks.push_back(l);
    }

  for (unsigned i = 0; i < count; ++i)
    for (unsigned j = i + 1; j < count; ++j) {
      int status = -1;
      if (nvml.p2pReadStatus(handles[i], handles[j], status) == kNvmlSuccess &&
          status == kNvmlP2PStatusOk)
        d.peerToPeer.push_back({int(i), int(j)});
    }
  return d;
}

namespace {

bool hasPeerToPeer(const Detection &d, int a, int b) {
  return std::find(d.peerToPeer.begin(), d.peerToPeer.end(), std::make_pair(a, b)) !=
         d.peerToPeer.end();
}

const DetectedNvLink *nvlinkBetween(const Detection &d, int a, int b) {
  for (const DetectedNvLink &l : d.nvlinks)
    if (l.a == a && l.b == b)
      return &l;
  return nullptr;
}

double nvlinkRate(const Detection &d, const DetectedNvLink &l) {
  int cc = std::min(d.gpus[size_t(l.a)].computeCapability, d.gpus[size_t(l.b)].computeCapability);
  return l.links * nvLinkBandwidthPerLink(l.version, cc);
}

// The memory a GPU that drives a display keeps free: what is in use now
// plus the usual 512 MiB context reserve, rounded up to 64 MiB.
uint64_t displayReserveBytes(const DetectedGpu &g) {
  uint64_t r = g.memoryUsedBytes + 512 * MiB;
  return (r + 64 * MiB - 1) / (64 * MiB) * (64 * MiB);
}

std::string pcieText(const DetectedGpu &g) {
  if (!g.pcieGeneration || !g.pcieWidth)
    return "PCIe unknown";
  return "PCIe " + std::to_string(g.pcieGeneration) + ".0 x" + std::to_string(g.pcieWidth);
}

} // namespace

StatusOr<std::string> topologyJson(const Detection &d, const WriteOptions &options) {
  using json = nlohmann::ordered_json;
  json top;
  top["name"] = options.name;
  std::string comment =
      "Detected by weft-detect through NVML" +
      (d.driverVersion.empty() ? std::string() : " (driver " + d.driverVersion + ")") +
      ". Devices are in PCI bus order, the order CUDA uses with "
      "CUDA_DEVICE_ORDER=PCI_BUS_ID: set it (or map devices with --devices) when running.";
  if (!options.comment.empty())
    comment += " " + options.comment;
  top["comment"] = comment;

  // NVLink peers per device, to size each one's group.
  std::vector<int> peers(d.gpus.size(), 0);
  std::vector<double> fastestLink(d.gpus.size(), 0);
  for (const DetectedNvLink &l : d.nvlinks) {
    double rate = nvlinkRate(d, l);
    for (int x : {l.a, l.b}) {
      ++peers[size_t(x)];
      fastestLink[size_t(x)] = std::max(fastestLink[size_t(x)], rate);
    }
  }

  json devices = json::array();
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    const DetectedGpu &g = d.gpus[i];
    json dev;
    std::string note = g.name + " at " + (g.busId.empty() ? "an unknown bus id" : g.busId) +
                       ", " + pcieText(g);
    if (!g.builtin.empty()) {
      dev["builtin"] = g.builtin;
      dev["memory_bytes"] = g.memoryBytes;
      note += "; rates from Weft's built-in profile";
    } else {
      // Described from NVML. The rates are derived: SMs x the generation's
      // per-SM rate x the maximum clock.
      std::string where = "GPU " + std::to_string(i) + " (" + g.name + ")";
      if (!g.memClockMHz || !g.busWidthBits)
        return failedPrecondition(
            where + " is not in Weft's database and NVML gives no memory clock or bus width, "
                    "so its memory bandwidth is unknown: write its device entry by hand "
                    "(docs/topology.md)");
      bool geforce = lower(g.name).find("geforce") != std::string::npos;
      int sms = g.cudaCores ? int(g.cudaCores) / coresPerSm(g.computeCapability) : 0;
      double clock = g.smClockMHz * 1e6;
      SmRates r = smRates(g.computeCapability, geforce);
      dev["name"] = deviceName(g.name);
      dev["description"] = g.name + " (detected)";
      dev["compute_capability"] = g.computeCapability;
      dev["memory_bytes"] = g.memoryBytes;
      // Double data rate: two transfers per memory clock on each bus bit.
      dev["memory_bandwidth_gbps"] =
          readable(2.0 * g.memClockMHz * 1e6 * g.busWidthBits / 8 / 1e9);
      double fp16 = sms * r.fp16 * clock / 1e12;
      if (!(fp16 > 0)) {
        // No SM count or clock: a floor that keeps the cost model
        // bandwidth-bound, flagged below.
        fp16 = 1;
        note += "; NVML gives no SM count or clock, so fp16_tflops is a placeholder of 1: "
                "replace it with the datasheet figure";
      } else {
        note += "; not in Weft's database: tensor rates derived from " + std::to_string(sms) +
                " SMs at " + std::to_string(g.smClockMHz) +
                " MHz, check them against the datasheet";
      }
      dev["fp16_tflops"] = readable(fp16);
      if (g.computeCapability >= 89 && r.fp8 > 0 && sms > 0 && clock > 0)
        dev["fp8_tflops"] = readable(sms * r.fp8 * clock / 1e12);
      if (r.int8 > 0 && sms > 0 && clock > 0)
        dev["int8_tops"] = readable(sms * r.int8 * clock / 1e12);
      if (g.cudaCores && clock > 0)
        dev["fp32_tflops"] = readable(2.0 * g.cudaCores * clock / 1e12);
      if (sms > 0)
        dev["sm_count"] = sms;
    }
    if (peers[i] > 0) {
      dev["nvlink_bandwidth_gbps"] = readable(fastestLink[i] / 1e9);
      dev["nvlink_group_size"] = std::max(2, peers[i] + 1);
    }
    if (g.displayActive && options.displayReserve) {
      dev["context_reserve_mib"] = displayReserveBytes(g) / MiB;
      note += "; drives a display: the " + gib(g.memoryUsedBytes) +
              " in use when detected is kept free";
    }
    if (options.calibration && i < options.calibration->gpus.size()) {
      const GpuMeasurement &m = options.calibration->gpus[i];
      nlohmann::ordered_json c;
      c["gpu"] = g.name;
      if (!d.driverVersion.empty())
        c["driver"] = d.driverVersion;
      if (!options.date.empty())
        c["date"] = options.date;
      c["seconds"] = readable(m.seconds);
      if (g.smClockMHz)
        c["sm_clock_mhz"] = g.smClockMHz;
      if (g.memClockMHz)
        c["memory_clock_mhz"] = g.memClockMHz;
      c["copy_bandwidth_gbps"] = readable(m.copyBandwidth / 1e9);
      c["gemm_tflops"] = readable(m.gemmFlops / 1e12);
      c["launch_us"] = readable(m.launchSeconds * 1e6);
      c["comment"] = "measured by weft-detect --calibrate: a device-to-device copy (bytes read "
                     "+ written), cuBLASLt FP16 GEMMs at prefill shapes, a replayed CUDA graph "
                     "of small nodes; host to device " +
                     std::to_string(int(m.hostToDevice / 1e9 + 0.5)) + " GB/s";
      dev["calibration"] = c;
    }
    dev["comment"] = note;
    devices.push_back(dev);
  }
  top["devices"] = devices;

  json links = json::array();
  std::vector<double> host(d.gpus.size(), 0);
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    host[i] = pcieBandwidth(d.gpus[i].pcieGeneration, d.gpus[i].pcieWidth);
    if (options.calibration && i < options.calibration->gpus.size() &&
        options.calibration->gpus[i].hostToDevice > 0)
      host[i] = options.calibration->gpus[i].hostToDevice; // measured
    if (host[i] <= 0)
      host[i] = 25e9; // the default when NVML cannot say
  }
  auto measuredPair = [&](size_t i, size_t j) -> const PairMeasurement * {
    if (!options.calibration)
      return nullptr;
    for (const PairMeasurement &p : options.calibration->pairs)
      if (size_t(p.a) == i && size_t(p.b) == j && p.bandwidth > 0)
        return &p;
    return nullptr;
  };
  for (size_t i = 0; i < d.gpus.size(); ++i)
    for (size_t j = i + 1; j < d.gpus.size(); ++j) {
      json l;
      l["devices"] = {i, j};
      const PairMeasurement *m = measuredPair(i, j);
      if (const DetectedNvLink *nv = nvlinkBetween(d, int(i), int(j))) {
        l["kind"] = "nvlink";
        l["bandwidth_gbps"] = readable((m ? m->bandwidth : nvlinkRate(d, *nv)) / 1e9);
        l["comment"] = std::to_string(nv->links) + " NVLink " +
                       std::to_string(nv->version) + " links" +
                       (nv->viaSwitch ? " through NVSwitch" : "");
      } else if (hasPeerToPeer(d, int(i), int(j)) || (m && m->peerToPeer)) {
        // Peer-to-peer over PCIe runs at the slower slot's rate.
        l["kind"] = "pcie";
        l["bandwidth_gbps"] = readable((m ? m->bandwidth : std::min(host[i], host[j])) / 1e9);
        l["comment"] = "peer-to-peer over PCIe";
      } else {
        continue; // no direct path: copies are staged through host memory
      }
      if (m) {
        l["latency_us"] = readable(m->latency * 1e6);
        l["comment"] = l["comment"].get<std::string>() + "; bandwidth and latency measured";
      }
      links.push_back(l);
    }
  top["links"] = links;

  json h;
  if (d.hostRamBytes)
    h["ram_bytes"] = d.hostRamBytes;
  json pcie = json::array();
  for (double b : host)
    pcie.push_back(readable(b / 1e9));
  h["pcie_bandwidth_gbps"] = pcie;
  h["comment"] = options.calibration
                     ? "PCIe rates: host-to-device copies from pinned memory, measured; GPU "
                       "pairs without NVLink or peer-to-peer have no link and copy through "
                       "host memory"
                     : "PCIe rates: the generation and width NVML reports x the fraction of the "
                       "raw rate a GPU copy reaches (25 of 31.5 GB/s on 4.0 x16); GPU pairs "
                       "without NVLink or peer-to-peer have no link and copy through host memory";
  top["host"] = h;
  if (options.calibration && !options.calibration->allReduces.empty()) {
    json groups = json::array();
    for (const AllReduceMeasurement &m : options.calibration->allReduces) {
      json g;
      g["devices"] = m.gpus;
      g["method"] = m.method;
      json times = json::array();
      for (const auto &[bytes, seconds] : m.times) {
        json t;
        t["bytes"] = bytes;
        t["us"] = readable(seconds * 1e6);
        times.push_back(t);
      }
      g["times"] = times;
      groups.push_back(g);
    }
    top["all_reduce"] = groups;
  }
  return top.dump(2) + "\n";
}

std::string summary(const Detection &d, const WriteOptions &options) {
  std::ostringstream os;
  os << d.gpus.size() << (d.gpus.size() == 1 ? " GPU" : " GPUs");
  if (!d.driverVersion.empty())
    os << " (driver " << d.driverVersion << ")";
  if (d.hostRamBytes)
    os << ", host RAM " << gib(d.hostRamBytes);
  os << "\n";
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    const DetectedGpu &g = d.gpus[i];
    char line[256];
    std::snprintf(line, sizeof line, "  %zu  %-32s %9s  sm_%d  %-13s", i, g.name.c_str(),
                  gib(g.memoryBytes).c_str(), g.computeCapability, pcieText(g).c_str());
    os << line << (g.builtin.empty() ? "  not in the database: described from NVML"
                                     : "  -> " + g.builtin);
    if (g.displayActive)
      os << (options.displayReserve ? "; drives a display, " + gib(g.memoryUsedBytes) +
                                          " in use kept free"
                                    : "; drives a display (nothing kept free for it)");
    else if (g.memoryUsedBytes > GiB)
      os << "; " << gib(g.memoryUsedBytes) << " in use by other processes now";
    os << "\n";
  }
  for (size_t i = 0; i < d.gpus.size(); ++i)
    for (size_t j = i + 1; j < d.gpus.size(); ++j) {
      os << "  " << i << "-" << j << "  ";
      if (const DetectedNvLink *nv = nvlinkBetween(d, int(i), int(j))) {
        char rate[32];
        std::snprintf(rate, sizeof rate, "%.2f", nvlinkRate(d, *nv) / 1e9);
        os << "NVLink " << nv->version << " x" << nv->links
           << (nv->viaSwitch ? " through NVSwitch" : "") << ", " << rate << " GB/s\n";
      } else if (hasPeerToPeer(d, int(i), int(j))) {
        os << "PCIe peer-to-peer\n";
      } else {
        os << "no peer-to-peer: copies go through host memory\n";
      }
    }
  return os.str();
}

} // namespace weft::detect

// Topology detection on the box that will run a plan: what NVML says about
// each GPU (name, memory, compute capability, PCIe generation and width,
// NVLink links, clocks, whether it drives a display), written as the
// topology JSON that weft-compile --topology reads (docs/topology.md).
// Runtime side: no LLVM, so weft-detect ships in the runtime package.
#ifndef WEFT_RUNTIME_DETECT_DETECT_H_
#define WEFT_RUNTIME_DETECT_DETECT_H_

#include "runtime/base/Status.h"
#include "runtime/detect/Nvml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::detect {

struct DetectedGpu {
  std::string name;               // as NVML reports it: "NVIDIA GeForce RTX 3090"
  std::string busId;              // "00000000:01:00.0"
  int computeCapability = 0;      // 86
  uint64_t memoryBytes = 0;       // total
  uint64_t memoryUsedBytes = 0;   // in use when detected (a display, other processes)
  bool displayActive = false;     // a monitor is driven by this GPU
  unsigned pcieGeneration = 0;    // most the GPU and its slot allow; 0 = unknown
  unsigned pcieWidth = 0;         // lanes; 0 = unknown
  unsigned smClockMHz = 0;        // maximum; 0 = unknown
  unsigned memClockMHz = 0;       // maximum; 0 = unknown
  unsigned busWidthBits = 0;      // 0 = unknown
  unsigned cudaCores = 0;         // 0 = unknown
  unsigned nvSwitchLinks = 0;     // active NVLink links to an NVSwitch, not to a GPU
  unsigned nvLinkVersion = 0;     // of its active links; 0 = none
  std::string builtin;            // Weft's database key for this part, "" if none
};

// A GPU pair joined by NVLink (directly or through NVSwitches).
struct DetectedNvLink {
  int a = 0, b = 0;
  unsigned links = 0;   // active links between them (per GPU for a switch)
  unsigned version = 0; // NVLink generation
  bool viaSwitch = false;
};

struct Detection {
  std::string driverVersion;
  std::vector<DetectedGpu> gpus;           // NVML order: PCI bus order
  std::vector<DetectedNvLink> nvlinks;
  std::vector<std::pair<int, int>> peerToPeer; // pairs that can read each other over PCIe
  uint64_t hostRamBytes = 0;
};

// Reads every GPU. No GPU at all is an error ("no NVIDIA GPU found"); a
// query NVML does not support for a part leaves that field unknown.
StatusOr<Detection> detect(const Nvml &nvml, uint64_t hostRamBytes);

// MemTotal of /proc/meminfo, or 0 when it cannot be read.
uint64_t readHostRamBytes();

// Weft's database key for a part as NVML names it ("NVIDIA GeForce RTX
// 3090" -> "rtx3090"), or "" when the database has no such part. Memory
// tells variants of one name apart (RTX 3060 8 GB / 12 GB); 0 takes the
// first part of that name.
std::string builtinDeviceFor(const std::string &nvmlName, uint64_t memoryBytes);
// Every key builtinDeviceFor can return (the tests check each is in the
// compiler's database).
std::vector<std::string> knownBuiltinKeys();

// Practical PCIe bandwidth per direction, bytes/s: the raw lane rate of the
// generation x lanes x the fraction a GPU copy reaches (25 GB/s of 31.5 on
// PCIe 4.0 x16). 0 when either is unknown.
double pcieBandwidth(unsigned generation, unsigned width);
// NVLink bytes/s per direction of one link of `version` on a part of
// compute capability `cc` (the GA102 bridge's links are narrower).
double nvLinkBandwidthPerLink(unsigned version, int cc);

// What weft-detect --calibrate measured (runtime/detect/Calibrate.h).
struct GpuMeasurement {
  double copyBandwidth = 0; // bytes/s, bytes read + written by a D2D copy
  double gemmFlops = 0;     // FP16 in, FP32 accumulate, through cuBLASLt
  double launchSeconds = 0; // per node of a replayed CUDA graph
  double hostToDevice = 0;  // bytes/s from pinned host memory
  double seconds = 0;       // how long this GPU took
};

struct PairMeasurement {
  int a = 0, b = 0;
  bool peerToPeer = false; // copies went directly, not through the host
  double bandwidth = 0;    // bytes/s per direction
  double latency = 0;      // s, a 4-byte copy
};

// FP16 all-reduces over a group of GPUs, as tensor-parallel plans run them
// (NCCL, captured in a CUDA graph), at the sizes TP buckets reduce.
struct AllReduceMeasurement {
  std::vector<int> gpus;  // detection indices, ascending
  std::string method;     // "NCCL 2.27.3, CUDA graph"
  std::vector<std::pair<uint64_t, double>> times; // (bytes, seconds), ascending bytes
};

struct Calibration {
  std::vector<GpuMeasurement> gpus; // in the detection's (NVML, PCI bus) order
  std::vector<PairMeasurement> pairs;
  std::vector<AllReduceMeasurement> allReduces;
  std::string allReduceSkipped; // why a group's all-reduce was not measured ("" when all were)
  double seconds = 0;
};

struct WriteOptions {
  std::string name = "detected";  // the topology's name in reports
  // Keep the memory a display holds now (plus the usual context reserve)
  // free on GPUs that drive one.
  bool displayReserve = true;
  std::string comment;            // added to the top-level comment (date, host)
  // Measurements to write: a "calibration" block per device (with `date`),
  // measured link and host bandwidths.
  const Calibration *calibration = nullptr;
  std::string date;
};

// The topology JSON (docs/topology.md). Known parts start from their
// built-in profile with NVML's memory; other parts are described from what
// NVML reports, with derived rates said to be derived. An unknown part whose
// memory bandwidth NVML cannot give is an error naming it.
StatusOr<std::string> topologyJson(const Detection &detection, const WriteOptions &options);

// A few lines for a person: each GPU, its slot, its links.
std::string summary(const Detection &detection, const WriteOptions &options);

} // namespace weft::detect

#endif // WEFT_RUNTIME_DETECT_DETECT_H_

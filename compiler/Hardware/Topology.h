// Hardware topology descriptions (devices, links, host) that the partitioner
// and cost model plan against; built-in profiles, short forms and JSON files.
#ifndef WEFT_COMPILER_HARDWARE_TOPOLOGY_H_
#define WEFT_COMPILER_HARDWARE_TOPOLOGY_H_

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft {
namespace hardware {

// Measured step time over the cost model's prediction, at a token count
// (weft-run --bench --write-calibration): the weight-streaming regions and
// the attention regions scale apart, so contexts other than the measured
// ones are predicted too.
struct StepScale {
  int64_t tokens = 1;
  double weights = 1;   // every region but attention
  double attention = 1; // attention regions
};

// What was measured on the device itself (weft-detect --calibrate; the step
// scales from weft-run --bench). Each figure measured replaces the
// datasheet's in the cost model; 0 or empty means not measured.
struct DeviceCalibration {
  std::string gpu;          // the GPU measured, as NVML names it
  std::string driver;       // its driver version
  std::string date;         // "2026-12-01"
  double seconds = 0;       // how long the calibration took
  int smClockMHz = 0;       // the GPU's maximum clocks when measured (0: not recorded)
  int memoryClockMHz = 0;
  double copyBandwidth = 0; // bytes/s: a device-to-device copy, read + written
  double gemmFlops = 0;     // FP16 tensor FLOP/s through cuBLASLt at prefill shapes
  double launchSeconds = 0; // per kernel replayed in a CUDA graph
  std::vector<StepScale> steps;        // decode steps, ascending tokens
  std::vector<StepScale> prefillSteps; // prefill chunks from position 0
};

// One GPU. Rates are dense peak figures (no 2:4 sparsity); docs/topology.md
// lists the built-in values and where each comes from.
struct DeviceProfile {
  std::string name;              // database key, e.g. "rtx3090"
  std::string description;       // "NVIDIA GeForce RTX 3090 (GA102)"
  int computeCapability = 0;     // 86, 89, 90, 80
  uint64_t memoryBytes = 0;      // physical memory (total as nvidia-smi shows it)
  double memoryBandwidth = 0;    // bytes/s (datasheet unless measured)
  double fp16TensorFlops = 0;    // dense, FP32 accumulate
  double bf16TensorFlops = 0;    // dense, FP32 accumulate
  double fp8TensorFlops = 0;     // dense, FP32 accumulate; 0 when the chip has no FP8
  double int8TensorOps = 0;      // dense; 0 = unknown
  double fp32Flops = 0;          // non-tensor; 0 = unknown
  int smCount = 0;               // 0 = unknown
  uint64_t l2Bytes = 0;          // 0 = unknown
  uint64_t contextReserveBytes = 0; // CUDA context + library handles kept free
  std::optional<uint64_t> memoryCapBytes; // user cap (--memory-cap)
  // NVLink: bytes/s per direction to one peer (0 = no NVLink), and the most
  // devices one all-to-all NVLink group can hold (2 for a bridge, 8 for an
  // HGX board), so a description cannot promise links the part cannot have.
  double nvlinkBandwidth = 0;
  int nvlinkGroupSize = 0;
  std::optional<DeviceCalibration> calibration;

  // The figures the cost model uses: measured where calibrated.
  double effectiveBandwidth() const {
    return calibration && calibration->copyBandwidth > 0 ? calibration->copyBandwidth
                                                         : memoryBandwidth;
  }

  // min(memory, cap) - reserve, saturating at 0.
  uint64_t usableBytes() const;
  // "sm_86".
  std::string smArch() const;
  bool hasFp8() const { return fp8TensorFlops > 0; }
  bool hasNVLink() const { return nvlinkBandwidth > 0 && nvlinkGroupSize >= 2; }
};

enum class LinkKind { NVLink, PCIe };
const char *linkKindName(LinkKind kind); // "nvlink", "pcie"

struct LinkProfile {
  int a = 0, b = 0; // device indices, a != b; the link is symmetric
  LinkKind kind = LinkKind::PCIe;
  double bandwidth = 0; // bytes/s per direction
  double latency = 0;   // s
};

struct HostProfile {
  uint64_t ramBytes = 0;
  std::vector<double> pcieBandwidth; // bytes/s per direction, per device
  double pcieLatency = 0;            // s, one host<->device hop
};

// One all-reduce size timed on the box: the sum of `bytes` of FP16 over the
// group, in place, as the plans run it (weft-detect --calibrate: NCCL in a
// CUDA graph, many back to back).
struct AllReduceTiming {
  uint64_t bytes = 0;
  double seconds = 0;
};

// All-reduce times of one device group, measured; they replace the ring
// model built from link figures for that group.
struct AllReduceCalibration {
  std::vector<int> devices;            // ascending, two or more
  std::string method;                  // "NCCL 2.27.3, CUDA graph"
  std::vector<AllReduceTiming> times;  // ascending bytes, at least one

  // Seconds for `bytes`: linear between the measured sizes, the smallest
  // size's time below them (latency-bound) and the largest size's rate
  // above them.
  double secondsFor(uint64_t bytes) const;
};

struct Topology {
  std::string name; // the spec it came from, for reports
  std::vector<DeviceProfile> devices;
  std::vector<LinkProfile> links; // device-device links
  HostProfile host;
  std::vector<AllReduceCalibration> allReduces; // measured groups (may be empty)

  // The measured all-reduce of exactly this device group (any order), or
  // nullptr.
  const AllReduceCalibration *allReduceFor(llvm::ArrayRef<int> group) const;

  // Fastest direct link between a and b, or nullptr (then traffic goes
  // a->host->b over PCIe).
  const LinkProfile *link(int a, int b) const;
  // Time to move `bytes` from device a to device b: latency + bytes /
  // bandwidth over the direct link, or the sum of the two host PCIe hops when
  // there is none. 0 when a == b.
  double transferSeconds(int a, int b, uint64_t bytes) const;
  // Every device has the same name, compute capability and memory (caps
  // aside). True for zero or one device.
  bool identicalDevices() const;
  // Every pair of devices has an NVLink link. True for zero or one device.
  bool allPairsNVLink() const;
};

bool operator==(const StepScale &x, const StepScale &y);
bool operator==(const DeviceCalibration &x, const DeviceCalibration &y);
bool operator==(const DeviceProfile &x, const DeviceProfile &y);
bool operator==(const LinkProfile &x, const LinkProfile &y);
bool operator==(const HostProfile &x, const HostProfile &y);
bool operator==(const AllReduceTiming &x, const AllReduceTiming &y);
bool operator==(const AllReduceCalibration &x, const AllReduceCalibration &y);
bool operator==(const Topology &x, const Topology &y);
inline bool operator!=(const Topology &x, const Topology &y) { return !(x == y); }

// Defaults used where a spec or file says nothing (docs/topology.md says
// where each comes from).
inline constexpr double kDefaultPCIeBandwidth = 25e9;       // bytes/s per direction
inline constexpr double kDefaultPCIeLatency = 10e-6;        // s
inline constexpr double kDefaultNVLinkLatency = 5e-6;       // s
inline constexpr uint64_t kDefaultContextReserve = 512ull << 20;
inline constexpr uint64_t kDefaultHostRam = 64ull << 30;
inline constexpr int kMaxDevices = 64;

// The built-in device database: "rtx3060-12g", "rtx3090", "rtx4090",
// "a100-80g", "h100-sxm", "h200".
std::vector<std::string> builtinDeviceNames();
// Also accepts aliases ("rtx3060"). Unknown names: an error listing the
// known ones.
llvm::Expected<DeviceProfile> getBuiltinDevice(llvm::StringRef name);

// A --topology value: a short form ("h200", "2xrtx3090:nvlink",
// "rtx3090+rtx3060-12g", "2xrtx3090:nvlink+rtx3060") or, when it ends in
// ".json" or names an existing file, a JSON file read with
// readTopologyFile.
llvm::Expected<Topology> parseTopologySpec(llvm::StringRef spec);
// A topology JSON document (format: docs/topology.md). Every error is one
// line that starts with `displayName` and names the field at fault.
llvm::Expected<Topology> parseTopologyJson(llvm::StringRef text,
                                           llvm::StringRef displayName);
llvm::Expected<Topology> readTopologyFile(llvm::StringRef path);
// Pretty JSON in the same format, every field explicit;
// parseTopologyJson(topologyToJson(t)) == t.
std::string topologyToJson(const Topology &topology);

// Applies a --memory-cap value: "10GB" (every device) or "0=20GB,1=10.5GiB"
// (per device index; a bare size may be combined with indexed ones, which
// then win). Units GB, GiB, MB, MiB. A cap above physical memory is kept but
// has no effect; a cap that leaves nothing after the context reserve is an
// error.
llvm::Error applyMemoryCaps(Topology &topology, llvm::StringRef caps);

} // namespace hardware
} // namespace weft

#endif // WEFT_COMPILER_HARDWARE_TOPOLOGY_H_

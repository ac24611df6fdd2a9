// The built-in device database: published (or, for the H200, measured)
// figures of the GPUs Weft plans for, each with its source.
#include "targets/Hardware/Topology.h"

#include "runtime/base/Text.h"

#include "llvm/ADT/StringExtras.h"

namespace weft {
namespace target {
namespace {

constexpr uint64_t MiB = 1ull << 20;

// Memory sizes are the totals nvidia-smi reports ("24576MiB" on a 3090), not
// the marketing GB, because that is what allocations are checked against.
// Rates are dense (no 2:4 sparsity). Sources:
//   [HW]    shared/HARDWARE.md (the project's hardware notes, from vendor
//           whitepapers and our measurements)
//   [GA102] NVIDIA Ampere GA102 GPU Architecture whitepaper, appendix A
//   [GA100] NVIDIA A100 80GB datasheet / Ampere GA100 whitepaper
//   [AD102] NVIDIA Ada GPU Architecture whitepaper (RTX 4090 table)
//   [H100]  NVIDIA H100 Tensor Core GPU datasheet (SXM5 column)
//   [SMI]   nvidia-smi totals seen on these cards in public logs
//   [OURS]  measured or read off the driver on our H200 machine
//           (HARDWARE.md records the copy bandwidth and fp16 GEMM rate)
// "derived" = per-SM-per-clock rate of a sibling chip x SMs x boost clock.
DeviceProfile makeRtx3060() {
  DeviceProfile d;
  d.name = "rtx3060-12g";
  d.description = "NVIDIA GeForce RTX 3060 12GB (GA106)";
  d.computeCapability = 86;
  d.memoryBytes = 12288 * MiB;   // [SMI] 12288MiB; 6 x 2 GiB GDDR6
  d.memoryBandwidth = 360e9;     // [HW] 15 Gbps x 192 bit
  // Ampere GeForce tensor cores run FP32-accumulate at half the FP16-
  // accumulate rate: 28 SMs x 512 FLOP/clk x 1.777 GHz (derived from GA102).
  d.fp16TensorFlops = 25.5e12;   // [HW] ~25.5 (derived)
  d.bf16TensorFlops = 25.5e12;   // same path as FP16 on GA10x [GA102]
  d.fp8TensorFlops = 0;          // sm_86 has no FP8 [HW]
  d.int8TensorOps = 101.9e12;    // derived: 28 SMs x 2048 op/clk x 1.777 GHz
  d.fp32Flops = 12.7e12;         // [HW] 3584 cores x 2 x 1.777 GHz
  d.smCount = 28;                // [HW]
  d.l2Bytes = 3 * MiB;           // [HW] 3 MB (6 x 512 KB slices)
  d.contextReserveBytes = kDefaultContextReserve;
  return d;
}

DeviceProfile makeRtx3090() {
  DeviceProfile d;
  d.name = "rtx3090";
  d.description = "NVIDIA GeForce RTX 3090 (GA102)";
  d.computeCapability = 86;
  d.memoryBytes = 24576 * MiB;   // [SMI] 24576MiB; 24 GB GDDR6X [HW]
  d.memoryBandwidth = 936e9;     // [HW] [GA102]
  d.fp16TensorFlops = 71e12;     // [HW] [GA102] FP32 accumulate
  d.bf16TensorFlops = 71e12;     // [GA102]
  d.fp8TensorFlops = 0;          // sm_86 has no FP8 [HW]
  d.int8TensorOps = 284e12;      // [GA102] 284 dense (568 sparse)
  d.fp32Flops = 35.6e12;         // [HW]
  d.smCount = 82;                // [HW]
  d.l2Bytes = 6 * MiB;           // [HW] [GA102] 6144 KB
  d.contextReserveBytes = kDefaultContextReserve;
  // NVLink 3 bridge: 4 links x 14.06 GB/s per direction [HW]; one bridge
  // joins exactly two cards.
  d.nvlinkBandwidth = 56.25e9;
  d.nvlinkGroupSize = 2;
  return d;
}

DeviceProfile makeRtx4090() {
  DeviceProfile d;
  d.name = "rtx4090";
  d.description = "NVIDIA GeForce RTX 4090 (AD102)";
  d.computeCapability = 89;
  d.memoryBytes = 24564 * MiB;   // [SMI] 24564MiB; 24 GB GDDR6X
  d.memoryBandwidth = 1008e9;    // [AD102] 21 Gbps x 384 bit
  d.fp16TensorFlops = 165.2e12;  // [AD102] FP32 accumulate (330.3 with FP16 acc.)
  d.bf16TensorFlops = 165.2e12;  // [AD102]
  // [AD102] 330.3 with FP32 accumulate (660.6 with FP16 accumulate); FP32
  // accumulation is what FP8 GEMMs for inference use.
  d.fp8TensorFlops = 330.3e12;
  d.int8TensorOps = 660.6e12;    // [AD102]
  d.fp32Flops = 82.6e12;         // [AD102]
  d.smCount = 128;               // [AD102]
  d.l2Bytes = 72 * MiB;          // [AD102] 72 MB
  d.contextReserveBytes = kDefaultContextReserve;
  return d;                      // no NVLink on Ada GeForce
}

DeviceProfile makeA100() {
  DeviceProfile d;
  d.name = "a100-80g";
  d.description = "NVIDIA A100 80GB SXM4 (GA100)";
  d.computeCapability = 80;
  d.memoryBytes = 81920 * MiB;   // [SMI] 81920MiB; 80 GB HBM2e
  d.memoryBandwidth = 2039e9;    // [GA100] 2,039 GB/s (SXM)
  d.fp16TensorFlops = 312e12;    // [GA100]
  d.bf16TensorFlops = 312e12;    // [GA100]
  d.fp8TensorFlops = 0;          // sm_80 has no FP8
  d.int8TensorOps = 624e12;      // [GA100]
  d.fp32Flops = 19.5e12;         // [GA100]
  d.smCount = 108;               // [GA100]
  d.l2Bytes = 40 * MiB;          // [GA100] 40 MB
  d.contextReserveBytes = kDefaultContextReserve;
  // NVLink 3: 12 links, 600 GB/s both ways [GA100]; HGX boards of 8 through
  // NVSwitch.
  d.nvlinkBandwidth = 300e9;
  d.nvlinkGroupSize = 8;
  return d;
}

DeviceProfile makeH100() {
  DeviceProfile d;
  d.name = "h100-sxm";
  d.description = "NVIDIA H100 80GB SXM5 (GH100)";
  d.computeCapability = 90;
  d.memoryBytes = 81559 * MiB;   // [SMI] 81559MiB; 80 GB HBM3
  d.memoryBandwidth = 3350e9;    // [H100] 3.35 TB/s
  d.fp16TensorFlops = 989.4e12;  // [H100] 1,979 with sparsity
  d.bf16TensorFlops = 989.4e12;  // [H100]
  d.fp8TensorFlops = 1978.9e12;  // [H100] 3,958 with sparsity
  d.int8TensorOps = 1978.9e12;   // [H100]
  d.fp32Flops = 66.9e12;         // [H100] 67
  d.smCount = 132;               // [H100]
  d.l2Bytes = 50 * MiB;          // [H100] 50 MB
  d.contextReserveBytes = kDefaultContextReserve;
  // NVLink 4: 900 GB/s both ways [H100]; HGX boards of 8 through NVSwitch.
  d.nvlinkBandwidth = 450e9;
  d.nvlinkGroupSize = 8;
  return d;
}

DeviceProfile makeH200() {
  DeviceProfile d;
  d.name = "h200";
  d.description = "NVIDIA H200 141GB SXM (GH100)";
  d.computeCapability = 90;
  d.memoryBytes = 143771 * MiB;  // [OURS] nvidia-smi total; 141 GB HBM3e
  // Measured on our H200, not the 4.8 TB/s datasheet figure: a device-to-
  // device copy, counting bytes read and written [OURS].
  d.memoryBandwidth = 4.28e12;
  // Measured on our H200 (8192^3 fp16 GEMM through PyTorch), not the ~990
  // datasheet figure [OURS].
  d.fp16TensorFlops = 762e12;
  // Measured on our H200 (8192^3 bf16 GEMM on random data) [OURS].
  d.bf16TensorFlops = 788e12;
  // Not measured: the H100 datasheet figures (same die and clocks); expect
  // roughly the ~77-80% of peak that fp16 and bf16 reached.
  d.fp8TensorFlops = 1978.9e12;
  d.int8TensorOps = 1978.9e12;
  d.fp32Flops = 66.9e12;         // [H100] datasheet, same die
  d.smCount = 132;               // [OURS] reported by the driver
  d.l2Bytes = 60 * MiB;          // [OURS] 60 MB reported by the driver
  d.contextReserveBytes = kDefaultContextReserve;
  d.nvlinkBandwidth = 450e9;     // NVLink 4, as the H100 [H100]
  d.nvlinkGroupSize = 8;
  return d;
}

struct Entry {
  const char *name;
  DeviceProfile (*make)();
};

const Entry kBuiltins[] = {
    {"rtx3060-12g", makeRtx3060}, {"rtx3090", makeRtx3090},
    {"rtx4090", makeRtx4090},     {"a100-80g", makeA100},
    {"h100-sxm", makeH100},       {"h200", makeH200},
};

struct Alias {
  const char *alias;
  const char *name;
};

// Only unambiguous aliases: "a100" or "h100" could be a PCIe part with other
// figures, so they are not accepted.
const Alias kAliases[] = {{"rtx3060", "rtx3060-12g"}};

} // namespace

std::vector<std::string> builtinDeviceNames() {
  std::vector<std::string> names;
  for (const Entry &e : kBuiltins)
    names.push_back(e.name);
  return names;
}

llvm::Expected<DeviceProfile> getBuiltinDevice(llvm::StringRef name) {
  llvm::StringRef key = name;
  for (const Alias &a : kAliases)
    if (key == a.alias)
      key = a.name;
  for (const Entry &e : kBuiltins)
    if (key == e.name)
      return e.make();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "unknown built-in device '" + printableForMessage(name.str(), 64) +
          "' (known: " + llvm::join(builtinDeviceNames(), ", ") +
          "; alias rtx3060)");
}

} // namespace target
} // namespace weft

// The built-in device database: published (or, for the H200, measured)
// figures of the GPUs Weft plans for, each with its source.
#include "compiler/Hardware/Topology.h"

#include "runtime/base/Text.h"

#include "llvm/ADT/StringExtras.h"

namespace weft {
namespace hardware {
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

// The parts below are described by one call each; the sources say where
// every figure comes from. Rates are dense, tensor rates with FP32
// accumulation (GeForce parts run that at half their FP16-accumulate rate).
// Memory is the nominal size in MiB; weft-detect replaces it with what the
// driver reports on the box (ECC, carve-outs).
//   [GA102] / [AD102] as above (their appendix tables list each GeForce
//           part); [GA104] NVIDIA RTX A4000 datasheet; [A5000] / [A6000]
//           their datasheets; [L4] / [L40S] their datasheets; [H100P] the
//           H100 datasheet's PCIe column; [ORIN] Jetson AGX Orin series
//           datasheet (64GB module).
// "derived" = SMs x the chip family's per-SM rate x boost clock, for rates a
// datasheet does not state.
struct Figures {
  const char *name, *description;
  int cc;
  uint64_t memoryMiB;
  double bandwidthGBps, fp16T, fp8T, int8T, fp32T;
  int sms;
  uint64_t l2MiB;
  double nvlinkGBps = 0; // per direction, to the one bridged peer
  int nvlinkGroup = 0;
  uint64_t reserveMiB = 0; // 0: the default context reserve
};

DeviceProfile fromFigures(const Figures &f) {
  DeviceProfile d;
  d.name = f.name;
  d.description = f.description;
  d.computeCapability = f.cc;
  d.memoryBytes = f.memoryMiB * MiB;
  d.memoryBandwidth = f.bandwidthGBps * 1e9;
  d.fp16TensorFlops = f.fp16T * 1e12;
  d.bf16TensorFlops = f.fp16T * 1e12; // the same path on Ampere, Ada and Hopper
  d.fp8TensorFlops = f.fp8T * 1e12;
  d.int8TensorOps = f.int8T * 1e12;
  d.fp32Flops = f.fp32T * 1e12;
  d.smCount = f.sms;
  d.l2Bytes = f.l2MiB * MiB;
  d.contextReserveBytes = f.reserveMiB ? f.reserveMiB * MiB : kDefaultContextReserve;
  d.nvlinkBandwidth = f.nvlinkGBps * 1e9;
  d.nvlinkGroupSize = f.nvlinkGroup;
  return d;
}

// GeForce RTX 3080 10GB (GA102, 68 SMs): [GA102] 760 GB/s, 59.5 T FP16, 238
// T INT8, 29.8 T FP32, 5 MB L2. The 12 GB variant is another part.
DeviceProfile makeRtx3080() {
  return fromFigures({"rtx3080", "NVIDIA GeForce RTX 3080 10GB (GA102)", 86, 10240, 760, 59.5,
                      0, 238, 29.8, 68, 5});
}
// GeForce RTX 3080 Ti (GA102, 80 SMs, 1.665 GHz boost): 19 Gbps x 384 bit =
// 912 GB/s, 34.1 T FP32 [GA102 family spec]; tensor rates derived.
DeviceProfile makeRtx3080Ti() {
  return fromFigures({"rtx3080ti", "NVIDIA GeForce RTX 3080 Ti (GA102)", 86, 12288, 912, 68.2,
                      0, 272.8, 34.1, 80, 6});
}
// GeForce RTX 4060 Ti 16GB (AD106, 34 SMs, 2.535 GHz): 18 Gbps x 128 bit =
// 288 GB/s, 22.1 T FP32, 32 MB L2; tensor rates derived from [AD102]'s per-SM
// rates.
DeviceProfile makeRtx4060Ti16() {
  return fromFigures({"rtx4060ti-16g", "NVIDIA GeForce RTX 4060 Ti 16GB (AD106)", 89, 16384, 288,
                      44.1, 88.3, 176.5, 22.1, 34, 32});
}
// GeForce RTX 4070 Ti SUPER (AD103, 66 SMs, 2.61 GHz): 21 Gbps x 256 bit =
// 672 GB/s, 44.1 T FP32, 48 MB L2; tensor rates derived.
DeviceProfile makeRtx4070TiSuper() {
  return fromFigures({"rtx4070ti-super", "NVIDIA GeForce RTX 4070 Ti SUPER (AD103)", 89, 16384,
                      672, 88.2, 176.4, 352.8, 44.1, 66, 48});
}
// GeForce RTX 4080 (AD103, 76 SMs): [AD102] appendix: 716.8 GB/s, 97.5 T
// FP16, 194.9 T FP8, 389.9 T INT8, 48.7 T FP32, 64 MB L2.
DeviceProfile makeRtx4080() {
  return fromFigures({"rtx4080", "NVIDIA GeForce RTX 4080 (AD103)", 89, 16384, 716.8, 97.5,
                      194.9, 389.9, 48.7, 76, 64});
}
// RTX A4000 (GA104, 48 SMs): [GA104] 448 GB/s, 153.4 T tensor with sparsity
// (76.7 dense), 19.2 T FP32, 4 MB L2; INT8 derived (twice FP16). No NVLink.
DeviceProfile makeRtxA4000() {
  return fromFigures({"rtx-a4000", "NVIDIA RTX A4000 (GA104)", 86, 16384, 448, 76.7, 0, 153.4,
                      19.2, 48, 4});
}
// RTX A5000 (GA102, 64 SMs): [A5000] 768 GB/s, 222.2 T tensor with sparsity
// (111.1 dense), 27.8 T FP32; NVLink bridge 112.5 GB/s both ways.
DeviceProfile makeRtxA5000() {
  return fromFigures({"rtx-a5000", "NVIDIA RTX A5000 (GA102)", 86, 24576, 768, 111.1, 0, 222.2,
                      27.8, 64, 6, 56.25, 2});
}
// RTX A6000 (GA102, 84 SMs): [A6000] 768 GB/s, 309.7 T tensor with sparsity
// (154.8 dense), 38.7 T FP32; NVLink bridge 112.5 GB/s both ways.
DeviceProfile makeRtxA6000() {
  return fromFigures({"rtx-a6000", "NVIDIA RTX A6000 (GA102)", 86, 49152, 768, 154.8, 0, 309.7,
                      38.7, 84, 6, 56.25, 2});
}
// L4 (AD104, 58 SMs): [L4] 300 GB/s, FP16 242 / FP8 485 / INT8 485 with
// sparsity (half dense), 30.3 T FP32, 48 MB L2.
DeviceProfile makeL4() {
  return fromFigures({"l4", "NVIDIA L4 (AD104)", 89, 24576, 300, 121, 242.5, 242.5, 30.3, 58,
                      48});
}
// L40S (AD102, 142 SMs): [L40S] 864 GB/s, FP16 362.05 / FP8 733 / INT8 733
// dense, 91.6 T FP32, 96 MB L2. No NVLink.
DeviceProfile makeL40S() {
  return fromFigures({"l40s", "NVIDIA L40S (AD102)", 89, 49152, 864, 362.05, 733, 733, 91.6,
                      142, 96});
}
// A100 40GB SXM4 (GA100): [GA100] 1,555 GB/s, otherwise the 80 GB part's
// figures; HGX boards of 8 through NVSwitch.
DeviceProfile makeA100_40() {
  return fromFigures({"a100-40g", "NVIDIA A100 40GB SXM4 (GA100)", 80, 40960, 1555, 312, 0, 624,
                      19.5, 108, 40, 300, 8});
}
// H100 PCIe (GH100, 114 SMs): [H100P] 2 TB/s, FP16 756.5 / FP8 1,513 / INT8
// 1,513 dense, 51.2 T FP32, 50 MB L2; NVLink bridge 600 GB/s both ways.
DeviceProfile makeH100Pcie() {
  return fromFigures({"h100-pcie", "NVIDIA H100 80GB PCIe (GH100)", 90, 81920, 2000, 756.5,
                      1513, 1513, 51.2, 114, 50, 300, 2});
}
// Jetson AGX Orin 64GB (GA10B, 16 SMs at 1.3 GHz): [ORIN] 204.8 GB/s
// LPDDR5, 170 sparse INT8 TOPS (85 dense), 5.3 T FP32; FP16 tensor derived
// (half INT8), 4 MB L2. Unified memory: the GPU shares the 64 GB with the
// CPU and the OS, so the reserve keeps 8 GiB for them (an estimate; raise it
// with context_reserve when the box runs more).
DeviceProfile makeJetsonAgxOrin() {
  return fromFigures({"jetson-agx-orin-64g", "NVIDIA Jetson AGX Orin 64GB (GA10B, unified memory)",
                      87, 65536, 204.8, 42.5, 0, 85, 5.3, 16, 4, 0, 0, 8192});
}

struct Entry {
  const char *name;
  DeviceProfile (*make)();
};

const Entry kBuiltins[] = {
    {"rtx3060-12g", makeRtx3060},
    {"rtx3080", makeRtx3080},
    {"rtx3080ti", makeRtx3080Ti},
    {"rtx3090", makeRtx3090},
    {"rtx4060ti-16g", makeRtx4060Ti16},
    {"rtx4070ti-super", makeRtx4070TiSuper},
    {"rtx4080", makeRtx4080},
    {"rtx4090", makeRtx4090},
    {"rtx-a4000", makeRtxA4000},
    {"rtx-a5000", makeRtxA5000},
    {"rtx-a6000", makeRtxA6000},
    {"l4", makeL4},
    {"l40s", makeL40S},
    {"a100-40g", makeA100_40},
    {"a100-80g", makeA100},
    {"h100-pcie", makeH100Pcie},
    {"h100-sxm", makeH100},
    {"h200", makeH200},
    {"jetson-agx-orin-64g", makeJetsonAgxOrin},
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

} // namespace hardware
} // namespace weft

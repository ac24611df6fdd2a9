// Tests of hardware topologies: built-in figures, short forms, JSON files and
// their round trip, memory caps, transfer times, and one-line errors.
#include "compiler/Hardware/Topology.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace weft {
namespace hardware {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

Topology parseOk(const std::string &spec) {
  llvm::Expected<Topology> t = parseTopologySpec(spec);
  if (!t) {
    ADD_FAILURE() << spec << ": " << llvm::toString(t.takeError());
    return Topology();
  }
  return std::move(*t);
}

Topology parseJsonOk(const std::string &json) {
  llvm::Expected<Topology> t = parseTopologyJson(json, "topo.json");
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError()) << "\n" << json;
    return Topology();
  }
  return std::move(*t);
}

DeviceProfile builtin(const char *name) {
  llvm::Expected<DeviceProfile> d = getBuiltinDevice(name);
  if (!d) {
    ADD_FAILURE() << llvm::toString(d.takeError());
    return DeviceProfile();
  }
  return std::move(*d);
}

// Applies caps that must be accepted.
void capOk(Topology &t, const char *caps) {
  if (llvm::Error e = applyMemoryCaps(t, caps))
    ADD_FAILURE() << caps << ": " << llvm::toString(std::move(e));
}

// The message of an error that must be one line.
std::string oneLine(llvm::Error e) {
  std::string msg = llvm::toString(std::move(e));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\r'), std::string::npos) << msg;
  return msg;
}

TEST(TopologyTest, BuiltinDatabaseHasTheRequiredDevices) {
  std::vector<std::string> names = builtinDeviceNames();
  for (const char *required :
       {"rtx3060-12g", "rtx3090", "rtx4090", "a100-80g", "h100-sxm", "h200"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
}

TEST(TopologyTest, EveryBuiltinDeviceIsSane) {
  for (const std::string &name : builtinDeviceNames()) {
    SCOPED_TRACE(name);
    llvm::Expected<DeviceProfile> d = getBuiltinDevice(name);
    ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
    EXPECT_EQ(d->name, name);
    EXPECT_FALSE(d->description.empty());
    EXPECT_TRUE(d->computeCapability == 80 || d->computeCapability == 86 ||
                d->computeCapability == 87 || d->computeCapability == 89 ||
                d->computeCapability == 90);
    EXPECT_EQ(d->smArch(), "sm_" + std::to_string(d->computeCapability));
    // FP8 exactly on Ada and Hopper.
    EXPECT_EQ(d->hasFp8(), d->computeCapability >= 89);
    EXPECT_GE(d->memoryBytes, 10 * GiB);
    EXPECT_LE(d->memoryBytes, 144 * GiB);
    EXPECT_GE(d->memoryBandwidth, 200e9); // Jetson AGX Orin: 204.8 GB/s
    EXPECT_LE(d->memoryBandwidth, 5e12);
    EXPECT_GT(d->fp16TensorFlops, 20e12);
    EXPECT_LE(d->fp16TensorFlops, 1000e12);
    EXPECT_GT(d->bf16TensorFlops, 0);
    EXPECT_GT(d->int8TensorOps, d->fp16TensorFlops); // int8 is always faster
    EXPECT_GT(d->fp32Flops, 5e12);
    EXPECT_LT(d->fp32Flops, d->fp16TensorFlops * 1.01);
    if (d->hasFp8())
      EXPECT_GT(d->fp8TensorFlops, d->fp16TensorFlops);
    EXPECT_GE(d->smCount, 16);
    EXPECT_LE(d->smCount, 142);
    EXPECT_GE(d->l2Bytes, 3 * MiB);
    // Unified memory (Jetson) keeps room for the CPU side and the OS.
    uint64_t reserve = name == "jetson-agx-orin-64g" ? 8 * GiB : 512 * MiB;
    EXPECT_EQ(d->contextReserveBytes, reserve);
    EXPECT_FALSE(d->memoryCapBytes.has_value());
    EXPECT_EQ(d->usableBytes(), d->memoryBytes - reserve);
    if (d->hasNVLink())
      EXPECT_GE(d->nvlinkGroupSize, 2);
    else
      EXPECT_EQ(d->nvlinkBandwidth, 0);
  }
}

TEST(TopologyTest, BuiltinFiguresMatchTheDatasheets) {
  DeviceProfile rtx3090 = builtin("rtx3090");
  EXPECT_EQ(rtx3090.memoryBandwidth, 936e9);
  EXPECT_EQ(rtx3090.smCount, 82);
  EXPECT_EQ(rtx3090.memoryBytes, 24576 * MiB);
  EXPECT_GE(rtx3090.memoryBytes, uint64_t(24e9));
  EXPECT_EQ(rtx3090.smArch(), "sm_86");
  EXPECT_FALSE(rtx3090.hasFp8());
  EXPECT_EQ(rtx3090.fp16TensorFlops, 71e12);
  EXPECT_EQ(rtx3090.l2Bytes, 6 * MiB);
  EXPECT_TRUE(rtx3090.hasNVLink());
  EXPECT_EQ(rtx3090.nvlinkBandwidth, 56.25e9);
  EXPECT_EQ(rtx3090.nvlinkGroupSize, 2);

  DeviceProfile rtx3060 = builtin("rtx3060-12g");
  EXPECT_EQ(rtx3060.memoryBandwidth, 360e9);
  EXPECT_EQ(rtx3060.smCount, 28);
  EXPECT_EQ(rtx3060.memoryBytes, 12 * GiB);
  EXPECT_EQ(rtx3060.smArch(), "sm_86");
  EXPECT_FALSE(rtx3060.hasFp8());
  EXPECT_FALSE(rtx3060.hasNVLink());
  EXPECT_EQ(rtx3060.l2Bytes, 3 * MiB);

  DeviceProfile rtx4090 = builtin("rtx4090");
  EXPECT_EQ(rtx4090.smArch(), "sm_89");
  EXPECT_TRUE(rtx4090.hasFp8());
  EXPECT_FALSE(rtx4090.hasNVLink());
  EXPECT_EQ(rtx4090.memoryBandwidth, 1008e9);
  EXPECT_EQ(rtx4090.smCount, 128);

  DeviceProfile a100 = builtin("a100-80g");
  EXPECT_EQ(a100.smArch(), "sm_80");
  EXPECT_FALSE(a100.hasFp8());
  EXPECT_EQ(a100.memoryBandwidth, 2039e9);
  EXPECT_EQ(a100.fp16TensorFlops, 312e12);
  EXPECT_EQ(a100.nvlinkBandwidth, 300e9);

  DeviceProfile h100 = builtin("h100-sxm");
  EXPECT_EQ(h100.smArch(), "sm_90");
  EXPECT_TRUE(h100.hasFp8());
  EXPECT_EQ(h100.memoryBandwidth, 3350e9);
  EXPECT_EQ(h100.nvlinkBandwidth, 450e9);

  // The H200 figures were measured on our machine.
  DeviceProfile h200 = builtin("h200");
  EXPECT_EQ(h200.smArch(), "sm_90");
  EXPECT_TRUE(h200.hasFp8());
  EXPECT_EQ(h200.memoryBandwidth, 4.28e12);
  EXPECT_EQ(h200.fp16TensorFlops, 762e12);
  EXPECT_EQ(h200.memoryBytes, 143771 * MiB);
  EXPECT_EQ(h200.smCount, 132);
  EXPECT_EQ(h200.nvlinkBandwidth, 450e9);
  EXPECT_EQ(h200.nvlinkGroupSize, 8);
}

TEST(TopologyTest, AliasAndUnknownDevice) {
  llvm::Expected<DeviceProfile> alias = getBuiltinDevice("rtx3060");
  ASSERT_TRUE(bool(alias));
  EXPECT_EQ(alias->name, "rtx3060-12g");
  llvm::Expected<DeviceProfile> unknown = getBuiltinDevice("gtx1080");
  ASSERT_FALSE(bool(unknown));
  std::string msg = oneLine(unknown.takeError());
  EXPECT_NE(msg.find("unknown built-in device 'gtx1080'"), std::string::npos) << msg;
  for (const std::string &name : builtinDeviceNames())
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
}

//===----------------------------------------------------------------------===//
// Short forms
//===----------------------------------------------------------------------===//

TEST(TopologyTest, ShortFormSingleDevice) {
  Topology t = parseOk("h200");
  EXPECT_EQ(t.name, "h200");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].name, "h200");
  EXPECT_TRUE(t.links.empty());
  EXPECT_TRUE(t.identicalDevices());
  EXPECT_TRUE(t.allPairsNVLink()); // no pairs
  EXPECT_EQ(t.host.ramBytes, 64 * GiB);
  EXPECT_EQ(t.host.pcieBandwidth, std::vector<double>{25e9});
  EXPECT_EQ(t.host.pcieLatency, 10e-6);
}

TEST(TopologyTest, ShortFormDifferentDevicesAreJoinedByPCIe) {
  Topology t = parseOk("rtx3090+rtx3060-12g");
  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_EQ(t.devices[0].name, "rtx3090");
  EXPECT_EQ(t.devices[1].name, "rtx3060-12g");
  ASSERT_EQ(t.links.size(), 1u);
  EXPECT_EQ(t.links[0].kind, LinkKind::PCIe);
  EXPECT_EQ(t.links[0].bandwidth, 25e9);
  EXPECT_EQ(t.links[0].latency, 10e-6);
  EXPECT_FALSE(t.identicalDevices());
  EXPECT_FALSE(t.allPairsNVLink());
  EXPECT_EQ(parseOk("rtx3090+rtx3060").devices, t.devices); // alias
  EXPECT_EQ(parseOk(" RTX3090 + RTX3060-12G ").devices, t.devices);
  // The name keeps the spec as given, with nothing that could break a line.
  Topology odd = parseOk("rtx3090\n+rtx3060");
  EXPECT_EQ(odd.name, "rtx3090\\x0a+rtx3060");
  EXPECT_EQ(odd.devices, t.devices);
}

TEST(TopologyTest, ShortFormCountsAndNVLink) {
  Topology pcie = parseOk("2xrtx3090");
  ASSERT_EQ(pcie.devices.size(), 2u);
  EXPECT_TRUE(pcie.identicalDevices());
  ASSERT_NE(pcie.link(0, 1), nullptr);
  EXPECT_EQ(pcie.link(0, 1)->kind, LinkKind::PCIe);
  EXPECT_FALSE(pcie.allPairsNVLink());
  EXPECT_EQ(parseOk("2xrtx3090:pcie"), [] {
    Topology t = parseOk("2xrtx3090");
    t.name = "2xrtx3090:pcie";
    return t;
  }());

  Topology bridged = parseOk("2xrtx3090:nvlink");
  ASSERT_EQ(bridged.links.size(), 1u);
  EXPECT_EQ(bridged.links[0].kind, LinkKind::NVLink);
  EXPECT_EQ(bridged.links[0].bandwidth, 56.25e9);
  EXPECT_EQ(bridged.links[0].latency, 5e-6);
  EXPECT_TRUE(bridged.allPairsNVLink());

  Topology hgx = parseOk("2xh200:nvlink");
  ASSERT_EQ(hgx.links.size(), 1u);
  EXPECT_EQ(hgx.links[0].bandwidth, 450e9);
  EXPECT_TRUE(hgx.allPairsNVLink());

  Topology eight = parseOk("8xh200:nvlink");
  EXPECT_EQ(eight.devices.size(), 8u);
  EXPECT_EQ(eight.links.size(), 28u);
  EXPECT_TRUE(eight.allPairsNVLink());
  EXPECT_EQ(eight.host.pcieBandwidth.size(), 8u);
}

TEST(TopologyTest, ShortFormMixesNVLinkGroupsAndPCIe) {
  Topology t = parseOk("2xrtx3090:nvlink+rtx3060");
  ASSERT_EQ(t.devices.size(), 3u);
  EXPECT_EQ(t.devices[2].name, "rtx3060-12g");
  ASSERT_EQ(t.links.size(), 3u);
  EXPECT_EQ(t.link(0, 1)->kind, LinkKind::NVLink);
  EXPECT_EQ(t.link(0, 2)->kind, LinkKind::PCIe);
  EXPECT_EQ(t.link(2, 1)->kind, LinkKind::PCIe);
  EXPECT_FALSE(t.allPairsNVLink());

  // Two bridged pairs: NVLink inside each pair only.
  Topology pairs = parseOk("2xrtx3090:nvlink+2xrtx3090:nvlink");
  EXPECT_EQ(pairs.link(0, 1)->kind, LinkKind::NVLink);
  EXPECT_EQ(pairs.link(2, 3)->kind, LinkKind::NVLink);
  EXPECT_EQ(pairs.link(1, 2)->kind, LinkKind::PCIe);
  EXPECT_TRUE(pairs.identicalDevices());
}

struct BadSpec {
  const char *spec;
  const char *expected; // substring of the message
};

void PrintTo(const BadSpec &b, std::ostream *os) { *os << b.spec; }

class TopologyBadSpecTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(TopologyBadSpecTest, GivesOneLineError) {
  llvm::Expected<Topology> t = parseTopologySpec(GetParam().spec);
  ASSERT_FALSE(bool(t)) << GetParam().spec;
  std::string msg = oneLine(t.takeError());
  EXPECT_EQ(msg.rfind("topology '", 0), 0u) << msg;
  EXPECT_NE(msg.find(GetParam().expected), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, TopologyBadSpecTest,
    ::testing::Values(
        BadSpec{"", "empty"},
        BadSpec{"   ", "empty"},
        BadSpec{"gtx1080", "unknown built-in device 'gtx1080' (known: rtx3060-12g"},
        BadSpec{"rtx3090+gtx1080", "unknown built-in device 'gtx1080'"},
        BadSpec{"2xrtx3060-12g:nvlink", "rtx3060-12g has no NVLink"},
        BadSpec{"2xrtx3060:nvlink", "rtx3060-12g has no NVLink"},
        BadSpec{"2xrtx4090:nvlink", "rtx4090 has no NVLink"},
        BadSpec{"3xrtx3090:nvlink", "an NVLink group of rtx3090 holds at most 2 devices, got 3"},
        BadSpec{"9xh200:nvlink", "holds at most 8 devices, got 9"},
        BadSpec{"0xh200", "device count in '0xh200' must be 1 to 64"},
        BadSpec{"65xh200", "must be 1 to 64"},
        BadSpec{"99999999999999999999xh200", "must be 1 to 64"},
        BadSpec{"33xh200+32xh200", "more than 64 devices"},
        BadSpec{"h200+", "empty device group"},
        BadSpec{"+h200", "empty device group"},
        BadSpec{"h200++h200", "empty device group"},
        BadSpec{"2xh200:infiniband", "unknown link kind 'infiniband'"},
        BadSpec{"2xh200:", "unknown link kind ''"},
        BadSpec{"gtx\n1080", "unknown built-in device 'gtx\\x0a1080'"},
        BadSpec{"x h200", "unknown built-in device"},
        BadSpec{"2x", "unknown built-in device ''"}),
    [](const ::testing::TestParamInfo<BadSpec> &info) {
      std::string name = "case" + std::to_string(info.index);
      return name;
    });

TEST(TopologyTest, SpecNamingAJsonFileReadsIt) {
  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("topology", "json", fd, path));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << R"({"devices": [{"builtin": "h200"}, {"builtin": "h200"}],
              "links": [{"devices": [0, 1], "kind": "nvlink"}]})";
  }
  Topology t = parseOk(std::string(path));
  EXPECT_EQ(t.name, std::string(path));
  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_TRUE(t.allPairsNVLink());
  EXPECT_EQ(t.links[0].bandwidth, 450e9);
  llvm::sys::fs::remove(path);

  llvm::Expected<Topology> missing = parseTopologySpec("/nonexistent/topo.json");
  ASSERT_FALSE(bool(missing));
  std::string msg = oneLine(missing.takeError());
  EXPECT_EQ(msg.rfind("/nonexistent/topo.json: cannot open the topology description", 0), 0u) << msg;
}

TEST(TopologyTest, ExampleFileIsTheShortFormWrittenOut) {
  std::string path =
      std::string(WEFT_FIXTURES_DIR) + "/../../compiler/Hardware/examples/rtx3090+rtx3060.json";
  Topology file = parseOk(path);
  Topology spec = parseOk("rtx3090+rtx3060");
  EXPECT_EQ(file.name, "rtx3090+rtx3060 desktop");
  EXPECT_EQ(file.devices, spec.devices);
  EXPECT_EQ(file.links, spec.links);
  EXPECT_EQ(file.host, spec.host);
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

const char *kExample = R"({
  "name": "lab box",
  "devices": [
    {"builtin": "rtx3090"},
    {"builtin": "rtx3060-12g", "memory_cap_gb": 10},
    {"name": "custom", "compute_capability": 89, "memory_gb": 24,
     "memory_bandwidth_gbps": 1008, "fp16_tflops": 165.2, "fp8_tflops": 330.3,
     "sm_count": 128, "l2_mib": 72}
  ],
  "links": [{"devices": [0, 1], "kind": "pcie", "bandwidth_gbps": 25, "latency_us": 10},
            {"devices": [2, 0], "kind": "pcie", "bandwidth_gbps": 12.5}],
  "host": {"ram_gb": 128, "pcie_bandwidth_gbps": [25, 25, 12.5]}
})";

TEST(TopologyTest, ParsesJsonWithBuiltinsOverridesAndCustomDevices) {
  Topology t = parseJsonOk(kExample);
  EXPECT_EQ(t.name, "lab box");
  ASSERT_EQ(t.devices.size(), 3u);
  EXPECT_EQ(t.devices[0], builtin("rtx3090"));
  EXPECT_EQ(t.devices[1].name, "rtx3060-12g");
  EXPECT_EQ(t.devices[1].memoryCapBytes, std::optional<uint64_t>(10000000000u));
  EXPECT_EQ(t.devices[1].usableBytes(), 10000000000u - 512 * MiB);
  const DeviceProfile &c = t.devices[2];
  EXPECT_EQ(c.name, "custom");
  EXPECT_EQ(c.description, "custom");
  EXPECT_EQ(c.smArch(), "sm_89");
  EXPECT_EQ(c.memoryBytes, 24000000000u);
  EXPECT_EQ(c.memoryBandwidth, 1008e9);
  EXPECT_EQ(c.fp16TensorFlops, 165.2e12);
  EXPECT_EQ(c.bf16TensorFlops, 165.2e12); // defaults to fp16
  EXPECT_EQ(c.fp8TensorFlops, 330.3e12);
  EXPECT_TRUE(c.hasFp8());
  EXPECT_EQ(c.int8TensorOps, 0);
  EXPECT_EQ(c.smCount, 128);
  EXPECT_EQ(c.l2Bytes, 72 * MiB);
  EXPECT_EQ(c.contextReserveBytes, 512 * MiB);
  EXPECT_FALSE(c.hasNVLink());
  ASSERT_EQ(t.links.size(), 2u);
  EXPECT_EQ(t.links[1].a, 2);
  EXPECT_EQ(t.links[1].b, 0);
  EXPECT_EQ(t.links[1].bandwidth, 12.5e9);
  EXPECT_EQ(t.links[1].latency, 10e-6); // PCIe default
  EXPECT_EQ(t.link(1, 2), nullptr);
  EXPECT_EQ(t.host.ramBytes, 128000000000u);
  EXPECT_EQ(t.host.pcieBandwidth, (std::vector<double>{25e9, 25e9, 12.5e9}));
  EXPECT_EQ(t.host.pcieLatency, 10e-6);
}

TEST(TopologyTest, JsonDefaultsAndSizeUnits) {
  Topology t = parseJsonOk(R"({"devices": [{"builtin": "rtx3090",
      "memory_cap_mib": 20480, "context_reserve_mb": 300}]})");
  EXPECT_EQ(t.name, "topo.json");
  EXPECT_TRUE(t.links.empty());
  EXPECT_EQ(t.host.ramBytes, 64 * GiB);
  EXPECT_EQ(t.host.pcieBandwidth, std::vector<double>{25e9});
  EXPECT_EQ(t.devices[0].memoryCapBytes, std::optional<uint64_t>(20 * GiB));
  EXPECT_EQ(t.devices[0].contextReserveBytes, 300000000u);

  Topology bytes = parseJsonOk(R"({"devices": [{"name": "x", "compute_capability": 80,
      "memory_bytes": 1000000000, "memory_bandwidth_gbps": 100, "fp16_tflops": 10,
      "bf16_tflops": 5, "context_reserve_bytes": 0}],
      "host": {"ram_gib": 2, "pcie_bandwidth_gbps": 16, "pcie_latency_us": 0}})");
  EXPECT_EQ(bytes.devices[0].memoryBytes, 1000000000u);
  EXPECT_EQ(bytes.devices[0].bf16TensorFlops, 5e12);
  EXPECT_EQ(bytes.devices[0].usableBytes(), 1000000000u);
  EXPECT_EQ(bytes.host.ramBytes, 2 * GiB);
  EXPECT_EQ(bytes.host.pcieBandwidth, std::vector<double>{16e9});
  EXPECT_EQ(bytes.host.pcieLatency, 0);

  // A builtin 3090 declared without its bridge.
  Topology noBridge = parseJsonOk(
      R"({"devices": [{"builtin": "rtx3090", "nvlink_bandwidth_gbps": 0}]})");
  EXPECT_FALSE(noBridge.devices[0].hasNVLink());
  EXPECT_EQ(noBridge.devices[0].nvlinkGroupSize, 0);

  // NVLink on a custom device; links default to the slower end.
  Topology nv = parseJsonOk(R"({"devices": [
      {"name": "a", "compute_capability": 90, "memory_gb": 80, "memory_bandwidth_gbps": 3000,
       "fp16_tflops": 900, "nvlink_bandwidth_gbps": 400, "nvlink_group_size": 4},
      {"builtin": "h100-sxm"}],
      "links": [{"devices": [0, 1], "kind": "nvlink"}]})");
  EXPECT_EQ(nv.links[0].bandwidth, 400e9);
  EXPECT_EQ(nv.links[0].latency, 5e-6);
  EXPECT_TRUE(nv.allPairsNVLink());
}

void expectRoundTrip(const Topology &t) {
  std::string printed = topologyToJson(t);
  llvm::Expected<Topology> back = parseTopologyJson(printed, "printed.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << "\n" << printed;
  EXPECT_TRUE(*back == t) << printed;
  EXPECT_EQ(topologyToJson(*back), printed);
}

TEST(TopologyTest, JsonRoundTrip) {
  for (const char *spec : {"h200", "rtx3090+rtx3060-12g", "rtx3090\t+rtx3060", "2xrtx3090", "2xrtx3090:nvlink",
                           "2xh200:nvlink", "2xrtx3090:nvlink+rtx3060", "rtx4090+a100-80g",
                           "8xh100-sxm:nvlink"}) {
    SCOPED_TRACE(spec);
    expectRoundTrip(parseOk(spec));
  }
  Topology example = parseJsonOk(kExample);
  expectRoundTrip(example);

  // Values that are not round in the file's units still come back exactly.
  Topology odd = parseOk("2xrtx3090");
  capOk(odd, "0=10.3GiB");
  odd.devices[1].memoryBandwidth = 1e12 / 3;
  odd.devices[1].fp16TensorFlops = 0.1 * 1e12 + 7;
  odd.devices[1].fp32Flops = 12345.678901234567e9;
  odd.links[0].bandwidth = 24.999999999e9;
  odd.links[0].latency = 1.0 / 3 * 1e-6;
  odd.host.pcieBandwidth[0] = 1e10 / 3;
  odd.host.pcieLatency = 0;
  odd.host.ramBytes = 123456789012;
  expectRoundTrip(odd);
  // Those that need more than 15 digits in the unit are written in SI.
  std::string oddText = topologyToJson(odd);
  EXPECT_NE(oddText.find("\"memory_bandwidth_bytes_per_s\": 333333333333.33331"),
            std::string::npos) << oddText;
  EXPECT_NE(oddText.find("\"latency_s\""), std::string::npos) << oddText;
  EXPECT_NE(oddText.find("\"pcie_bandwidth_bytes_per_s\""), std::string::npos) << oddText;
  EXPECT_NE(oddText.find("\"memory_cap_bytes\": 11059540787"), std::string::npos) << oddText;

  // Rates are read as decimals: 66.9 TFLOPS is exactly the literal 66.9e12.
  Topology si = parseJsonOk(R"({"devices": [{"builtin": "h200", "fp32_tflops": 66.9,
      "memory_bandwidth_bytes_per_s": 4.8e12, "fp16_flops": 989.4e12}],
      "host": {"pcie_bandwidth_bytes_per_s": [64e9], "pcie_latency_s": 2e-6}})");
  EXPECT_EQ(si.devices[0].fp32Flops, 66.9e12);
  EXPECT_EQ(si.devices[0].memoryBandwidth, 4.8e12);
  EXPECT_EQ(si.devices[0].fp16TensorFlops, 989.4e12);
  EXPECT_EQ(si.host.pcieBandwidth, std::vector<double>{64e9});
  EXPECT_EQ(si.host.pcieLatency, 2e-6);
  expectRoundTrip(si);

  std::string h200 = topologyToJson(parseOk("2xh200:nvlink"));
  EXPECT_NE(h200.find("\"memory_bandwidth_gbps\": 4280,"), std::string::npos) << h200;
  EXPECT_NE(h200.find("\"fp32_tflops\": 66.9,"), std::string::npos) << h200;
  EXPECT_NE(h200.find("\"latency_us\": 5\n"), std::string::npos) << h200;

  std::string printed = topologyToJson(parseOk("rtx3090"));
  EXPECT_NE(printed.find("\"memory_bandwidth_gbps\": 936,"), std::string::npos) << printed;
  EXPECT_NE(printed.find("\"fp32_tflops\": 35.6,"), std::string::npos) << printed;
  EXPECT_NE(printed.find("\"pcie_latency_us\": 10"), std::string::npos) << printed;
  EXPECT_NE(printed.find("\"nvlink_bandwidth_gbps\": 56.25,"), std::string::npos) << printed;
}

struct BadJson {
  const char *what;
  std::string json;
  const char *expected; // substring of the message
};

void PrintTo(const BadJson &b, std::ostream *os) { *os << b.what; }

class TopologyBadJsonTest : public ::testing::TestWithParam<BadJson> {};

TEST_P(TopologyBadJsonTest, GivesOneLineErrorNamingFileAndField) {
  llvm::Expected<Topology> t = parseTopologyJson(GetParam().json, "topo.json");
  ASSERT_FALSE(bool(t)) << GetParam().what;
  std::string msg = oneLine(t.takeError());
  EXPECT_EQ(msg.rfind("topo.json: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(GetParam().expected), std::string::npos)
      << GetParam().what << ": " << msg;
}

// A topology with one device entry `device` (and a second plain rtx3090).
std::string withDevice(const std::string &device) {
  return R"({"devices": [{"builtin": "rtx3090"}, )" + device + "]}";
}

std::string withLinks(const std::string &links) {
  return R"({"devices": [{"builtin": "rtx3090"}, {"builtin": "rtx3060"}, {"builtin": "rtx3090"}],
             "links": )" + links + "}";
}

std::string withHost(const std::string &host) {
  return R"({"devices": [{"builtin": "rtx3090"}, {"builtin": "rtx3060"}], "host": )" + host + "}";
}

const char *kCustom = R"("name": "c", "compute_capability": 86, "memory_gb": 24,
                         "memory_bandwidth_gbps": 900, "fp16_tflops": 70)";

std::string custom(const std::string &extra) {
  return std::string("{") + kCustom + extra + "}";
}

INSTANTIATE_TEST_SUITE_P(
    Calibration, TopologyBadJsonTest,
    ::testing::Values(
        BadJson{"calibration of another part",
                withDevice(R"({"builtin": "rtx3060", "calibration": {"gpu": "NVIDIA GeForce RTX 3090"}})"),
                "field 'devices[1].calibration.gpu': 'NVIDIA GeForce RTX 3090' is a rtx3090, not a "
                "rtx3060-12g: calibrate on the device this entry describes"},
        BadJson{"calibration of an unknown part",
                withDevice(R"({"builtin": "rtx3060", "calibration": {"gpu": "NVIDIA Mystery"}})"),
                "'NVIDIA Mystery' is not a rtx3060-12g"},
        BadJson{"no gpu", withDevice(R"({"builtin": "rtx3090", "calibration": {}})"),
                "field 'devices[1].calibration.gpu': missing"},
        BadJson{"bandwidth above the datasheet",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "copy_bandwidth_gbps": 2000}})"),
                "field 'devices[1].calibration.copy_bandwidth_gbps': 2000 is more than 20% above the "
                "memory bandwidth"},
        BadJson{"zero bandwidth",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "copy_bandwidth_gbps": 0}})"),
                "field 'devices[1].calibration.copy_bandwidth_gbps': expected a positive number"},
        BadJson{"negative GEMM rate",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "gemm_tflops": -3}})"),
                "field 'devices[1].calibration.gemm_tflops': expected a positive number"},
        BadJson{"steps out of order",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "steps": [{"tokens": 8, "weights_scale": 1, "attention_scale": 1},
                                         {"tokens": 4, "weights_scale": 1, "attention_scale": 1}]}})"),
                "field 'devices[1].calibration.steps[1].tokens': expected more than the previous "
                "entry's 8"},
        BadJson{"scale out of range",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "prefill_steps": [{"tokens": 512, "weights_scale": 9, "attention_scale": 1}]}})"),
                "field 'devices[1].calibration.prefill_steps[0].weights_scale': expected 0.2 to 5"},
        BadJson{"scale missing",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "steps": [{"tokens": 1, "weights_scale": 1.1}]}})"),
                "field 'devices[1].calibration.steps[0].attention_scale': missing"},
        BadJson{"unknown calibration field",
                withDevice(R"({"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090",
                               "copy_bandwidth": 900}})"),
                "field 'devices[1].calibration.copy_bandwidth': unknown field; did you mean "
                "'copy_bandwidth_gbps'?"}));

TEST(TopologyTest, CalibrationReadsWritesAndLeavesUncalibratedDevicesAlone) {
  Topology t = parseJsonOk(R"({"devices": [
      {"builtin": "rtx3090", "calibration": {"gpu": "NVIDIA GeForce RTX 3090", "driver": "560.35.03",
        "date": "2026-12-01", "seconds": 41.5, "sm_clock_mhz": 2100, "memory_clock_mhz": 9751,
        "copy_bandwidth_gbps": 880.5, "gemm_tflops": 66,
        "launch_us": 2.4,
        "steps": [{"tokens": 1, "weights_scale": 1.06, "attention_scale": 1.5},
                  {"tokens": 8, "weights_scale": 1.16, "attention_scale": 1.19}],
        "prefill_steps": [{"tokens": 512, "weights_scale": 0.63, "attention_scale": 0.63}]}},
      {"builtin": "rtx3060"}]})");
  ASSERT_EQ(t.devices.size(), 2u);
  ASSERT_TRUE(t.devices[0].calibration.has_value());
  const DeviceCalibration &c = *t.devices[0].calibration;
  EXPECT_EQ(c.gpu, "NVIDIA GeForce RTX 3090");
  EXPECT_EQ(c.smClockMHz, 2100);
  EXPECT_EQ(c.memoryClockMHz, 9751);
  EXPECT_EQ(c.copyBandwidth, 880.5e9);
  EXPECT_EQ(c.gemmFlops, 66e12);
  EXPECT_DOUBLE_EQ(c.launchSeconds, 2.4e-6);
  ASSERT_EQ(c.steps.size(), 2u);
  EXPECT_EQ(c.steps[1].tokens, 8);
  EXPECT_EQ(c.prefillSteps.size(), 1u);
  EXPECT_EQ(t.devices[0].effectiveBandwidth(), 880.5e9);
  EXPECT_FALSE(t.devices[1].calibration.has_value()); // partial: the 3060 keeps its datasheet
  EXPECT_EQ(t.devices[1].effectiveBandwidth(), t.devices[1].memoryBandwidth);
  llvm::Expected<Topology> back = parseTopologyJson(topologyToJson(t), "printed.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << topologyToJson(t);
  EXPECT_EQ(*back, t);
}

TEST(TopologyTest, AllReduceTimesReadWriteAndInterpolate) {
  Topology t = parseJsonOk(R"({"devices": [{"builtin": "h200"}, {"builtin": "h200"},
                                           {"builtin": "h200"}],
      "links": [{"devices": [0, 1], "kind": "nvlink"}],
      "all_reduce": [{"devices": [1, 0], "method": "NCCL 2.27.3, CUDA graph",
                      "times": [{"bytes": 8192, "us": 10}, {"bytes": 32768, "us": 14},
                                {"bytes": 1048576, "us": 40}]}]})");
  ASSERT_EQ(t.allReduces.size(), 1u);
  const AllReduceCalibration *a = t.allReduceFor({0, 1});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(t.allReduceFor({1, 0}), a);
  EXPECT_EQ(t.allReduceFor({0, 2}), nullptr);
  EXPECT_EQ(t.allReduceFor({0, 1, 2}), nullptr);
  EXPECT_DOUBLE_EQ(a->secondsFor(100), 10e-6);            // latency-bound below
  EXPECT_DOUBLE_EQ(a->secondsFor(20480), 12e-6);          // halfway
  EXPECT_DOUBLE_EQ(a->secondsFor(2 * 1048576), 80e-6);    // the largest size's rate
  llvm::Expected<Topology> back = parseTopologyJson(topologyToJson(t), "printed.json");
  ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << topologyToJson(t);
  EXPECT_EQ(*back, t);
}

std::string withAllReduce(const std::string &groups) {
  return R"({"devices": [{"builtin": "rtx3090"}, {"builtin": "rtx3090"}, {"builtin": "rtx3060"}],
             "links": [{"devices": [0, 1], "kind": "nvlink"}], "all_reduce": )" +
         groups + "}";
}

INSTANTIATE_TEST_SUITE_P(
    AllReduce, TopologyBadJsonTest,
    ::testing::Values(
        BadJson{"not a list", withAllReduce("{}"), "field 'all_reduce': expected a list"},
        BadJson{"one device", withAllReduce(R"([{"devices": [0], "times": []}])"),
                "field 'all_reduce[0].devices': expected two or more device indices"},
        BadJson{"index out of range", withAllReduce(R"([{"devices": [0, 3], "times": []}])"),
                "field 'all_reduce[0].devices': 3 is not a device index (the topology has 3 "
                "devices)"},
        BadJson{"listed twice", withAllReduce(R"([{"devices": [1, 1], "times": []}])"),
                "field 'all_reduce[0].devices': device 1 is listed twice"},
        BadJson{"group twice",
                withAllReduce(R"([{"devices": [0, 1], "times": [{"bytes": 8, "us": 20}]},
                                  {"devices": [1, 0], "times": [{"bytes": 8, "us": 20}]}])"),
                "field 'all_reduce[1].devices': the same group as all_reduce[0]"},
        BadJson{"no times", withAllReduce(R"([{"devices": [0, 1], "times": []}])"),
                "field 'all_reduce[0].times': expected a list of"},
        BadJson{"sizes descend",
                withAllReduce(R"([{"devices": [0, 1],
                                   "times": [{"bytes": 8192, "us": 20}, {"bytes": 4096, "us": 30}]}])"),
                "field 'all_reduce[0].times[1].bytes': 4096 is not larger than the size before "
                "it (8192)"},
        BadJson{"zero time",
                withAllReduce(R"([{"devices": [0, 1], "times": [{"bytes": 8192, "us": 0}]}])"),
                "field 'all_reduce[0].times[0].us': expected a positive number"},
        BadJson{"fractional bytes",
                withAllReduce(R"([{"devices": [0, 1], "times": [{"bytes": 8.5, "us": 3}]}])"),
                "field 'all_reduce[0].times[0].bytes': expected a positive whole number"},
        BadJson{"faster than the NVLink bridge",
                withAllReduce(R"([{"devices": [0, 1], "times": [{"bytes": 104857600, "us": 100}]}])"),
                "field 'all_reduce[0].times[0].us': 104857600 bytes in 100.0 us is 1049 GB/s "
                "over the ring, above what its slowest link carries (56 GB/s)"},
        BadJson{"faster than host copies",
                withAllReduce(R"([{"devices": [0, 2], "times": [{"bytes": 104857600, "us": 5000}]}])"),
                "above what its slowest link carries (12 GB/s)"},
        BadJson{"misspelt time", withAllReduce(R"([{"devices": [0, 1], "times": [{"bytes": 8, "usec": 3}]}])"),
                "field 'all_reduce[0].times[0].usec': unknown field"}));

INSTANTIATE_TEST_SUITE_P(
    Malformed, TopologyBadJsonTest,
    ::testing::Values(
        BadJson{"not json", "{\"devices\": [", "invalid JSON"},
        BadJson{"trailing garbage", withDevice("{\"builtin\": \"h200\"}") + " x",
                "invalid JSON"},
        BadJson{"invalid utf-8", withDevice("{\"builtin\": \"h2\xff\xfe\"}"),
                "invalid UTF-8 at byte"},
        BadJson{"not an object", "[1, 2]", "expected a JSON object at the top level"},
        BadJson{"unknown top-level field", R"({"device": []})",
                "field 'device': unknown field; did you mean 'devices'?"},
        BadJson{"unknown field far from any", R"({"devices": [], "zzzzzzzzzz": 1})",
                "field 'zzzzzzzzzz': unknown field (see docs/topology.md)"},
        BadJson{"key with a newline", "{\"de\\nvices\": []}", "field 'de\\x0avices'"},
        BadJson{"missing devices", R"({"name": "x"})", "field 'devices': missing"},
        BadJson{"devices not a list", R"({"devices": {}})", "field 'devices': expected a list"},
        BadJson{"no devices", R"({"devices": []})",
                "field 'devices': expected 1 to 64 devices, got 0"},
        BadJson{"name not a string", R"({"name": 3, "devices": [{"builtin": "h200"}]})",
                "field 'name': expected a string, got 3"},
        BadJson{"name with a newline", "{\"name\": \"a\\nb\", \"devices\": [{\"builtin\": \"h200\"}]}",
                "field 'name': contains control characters"},
        BadJson{"comment not a string", R"({"comment": 1, "devices": [{"builtin": "h200"}]})",
                "field 'comment': expected a string"},
        BadJson{"device not an object", withDevice("\"rtx3090\""),
                "field 'devices[1]': expected an object, got \"rtx3090\""},
        BadJson{"unknown builtin", withDevice(R"({"builtin": "gtx1080"})"),
                "field 'devices[1].builtin': unknown built-in device 'gtx1080' (known: "},
        BadJson{"misspelt device field", withDevice(R"({"builtin": "h200", "memroy_gb": 3})"),
                "field 'devices[1].memroy_gb': unknown field; did you mean 'memory_gb'?"},
        BadJson{"custom without name", withDevice(R"({"compute_capability": 86})"),
                "field 'devices[1].name': missing (required for a device without \"builtin\")"},
        BadJson{"custom without cc", withDevice(R"({"name": "c", "memory_gb": 1})"),
                "field 'devices[1].compute_capability': missing"},
        BadJson{"custom without memory", withDevice(R"({"name": "c", "compute_capability": 86})"),
                "field 'devices[1].memory_gb': missing"},
        BadJson{"custom without bandwidth",
                withDevice(R"({"name": "c", "compute_capability": 86, "memory_gb": 2})"),
                "field 'devices[1].memory_bandwidth_gbps': missing"},
        BadJson{"custom without fp16",
                withDevice(R"({"name": "c", "compute_capability": 86, "memory_gb": 2,
                               "memory_bandwidth_gbps": 100})"),
                "field 'devices[1].fp16_tflops': missing"},
        BadJson{"negative memory", withDevice(R"({"builtin": "rtx3060", "memory_gb": -3})"),
                "topo.json: field 'devices[1].memory_gb': expected a positive number, got -3"},
        BadJson{"zero bandwidth",
                withDevice(R"({"builtin": "h200", "memory_bandwidth_gbps": 0})"),
                "field 'devices[1].memory_bandwidth_gbps': expected a positive number, got 0"},
        BadJson{"memory as a string", withDevice(R"({"builtin": "h200", "memory_gb": "24"})"),
                "field 'devices[1].memory_gb': expected a number, got \"24\""},
        BadJson{"fractional bytes", withDevice(R"({"builtin": "h200", "memory_bytes": 1.5})"),
                "field 'devices[1].memory_bytes': expected a whole number of bytes, got 1.5"},
        BadJson{"two memory units",
                withDevice(R"({"builtin": "h200", "memory_gb": 24, "memory_bytes": 24})"),
                "conflicts with 'devices[1].memory_"},
        BadJson{"a rate in two units",
                withDevice(R"({"builtin": "h200", "fp16_tflops": 1, "fp16_flops": 1e12})"),
                "field 'devices[1].fp16_flops': conflicts with 'devices[1].fp16_tflops'"},
        BadJson{"negative SI rate", withDevice(R"({"builtin": "h200", "fp8_flops": -1})"),
                "field 'devices[1].fp8_flops': expected a number >= 0, got -1"},
        BadJson{"host latency in two units",
                withHost(R"({"pcie_latency_us": 1, "pcie_latency_s": 1e-6})"),
                "field 'host.pcie_latency_s': conflicts with 'host.pcie_latency_us'"},
        BadJson{"huge memory", withDevice(R"({"builtin": "h200", "memory_gb": 1e30})"),
                "field 'devices[1].memory_gb': too large"},
        BadJson{"infinite-ish rate", withDevice(R"({"builtin": "h200", "fp16_tflops": 1e308})"),
                "field 'devices[1].fp16_tflops': expected a positive number, got 1"},
        BadJson{"cc written 8.6", withDevice(R"({"builtin": "h200", "compute_capability": 8.6})"),
                "field 'devices[1].compute_capability': expected major * 10 + minor, e.g. 86"},
        BadJson{"cc out of range", withDevice(R"({"builtin": "h200", "compute_capability": 1000})"),
                "field 'devices[1].compute_capability': expected an integer in [30, 199], got 1000"},
        BadJson{"fp8 on sm_86", withDevice(custom(", \"fp8_tflops\": 10")),
                "field 'devices[1].fp8_tflops': expected 0: compute capability 86 (sm_86) has no FP8"},
        BadJson{"fp8 left on by a cc override",
                withDevice(R"({"builtin": "h100-sxm", "compute_capability": 80})"),
                "field 'devices[1].compute_capability': compute capability 80 (sm_80) has no FP8"},
        BadJson{"bad device name", withDevice(R"({"builtin": "h200", "name": "my gpu"})"),
                "field 'devices[1].name': expected 1 to 64 letters"},
        BadJson{"long description",
                withDevice("{\"builtin\": \"h200\", \"description\": \"" + std::string(1025, 'a') + "\"}"),
                "field 'devices[1].description': longer than 1024 bytes (1025)"},
        BadJson{"negative sm count", withDevice(R"({"builtin": "h200", "sm_count": -1})"),
                "field 'devices[1].sm_count': expected an integer in [0, 1048576], got -1"},
        BadJson{"negative int8", withDevice(R"({"builtin": "h200", "int8_tops": -1})"),
                "field 'devices[1].int8_tops': expected a number >= 0, got -1"},
        BadJson{"zero cap", withDevice(R"({"builtin": "h200", "memory_cap_gb": 0})"),
                "field 'devices[1].memory_cap_gb': expected a positive number, got 0"},
        BadJson{"tiny cap", withDevice(R"({"builtin": "h200", "memory_cap_gb": 1e-12})"),
                "field 'devices[1].memory_cap_gb': less than one byte"},
        BadJson{"cap below reserve", withDevice(R"({"builtin": "h200", "memory_cap_mib": 512})"),
                "field 'devices[1].memory_cap_mib': leaves no usable memory"},
        BadJson{"reserve above memory",
                withDevice(R"({"builtin": "rtx3060", "context_reserve_gib": 12})"),
                "field 'devices[1].context_reserve_gib': leaves no usable memory"},
        BadJson{"nvlink group without bandwidth",
                withDevice(custom(", \"nvlink_group_size\": 2")),
                "field 'devices[1].nvlink_group_size': must be 0 when nvlink_bandwidth_gbps is 0"},
        BadJson{"nvlink group of one",
                withDevice(custom(", \"nvlink_bandwidth_gbps\": 50, \"nvlink_group_size\": 1")),
                "field 'devices[1].nvlink_group_size': expected at least 2 with NVLink, got 1"},
        BadJson{"too many devices",
                [] {
                  std::string s = R"({"devices": [)";
                  for (int i = 0; i < 65; ++i)
                    s += std::string(i ? "," : "") + R"({"builtin": "h200"})";
                  return s + "]}";
                }(),
                "field 'devices': expected 1 to 64 devices, got 65"},
        BadJson{"links not a list", withLinks("{}"), "field 'links': expected a list"},
        BadJson{"link not an object", withLinks("[3]"), "field 'links[0]': expected an object"},
        BadJson{"link without devices", withLinks(R"([{"kind": "pcie"}])"),
                "field 'links[0].devices': missing"},
        BadJson{"link with one device", withLinks(R"([{"devices": [0], "kind": "pcie"}])"),
                "field 'links[0].devices': expected two device indices such as [0, 1], got [0]"},
        BadJson{"link index out of range", withLinks(R"([{"devices": [0, 5], "kind": "pcie"}])"),
                "field 'links[0].devices': device index 5 is out of range (the topology has 3 devices)"},
        BadJson{"negative link index", withLinks(R"([{"devices": [-1, 0], "kind": "pcie"}])"),
                "device index -1 is out of range"},
        BadJson{"link to itself", withLinks(R"([{"devices": [1, 1], "kind": "pcie"}])"),
                "field 'links[0].devices': a link from device 1 to itself"},
        BadJson{"duplicate link",
                withLinks(R"([{"devices": [0, 1], "kind": "pcie"}, {"devices": [1, 0], "kind": "pcie"}])"),
                "field 'links[1].devices': devices 0 and 1 are already linked by links[0]"},
        BadJson{"link without kind", withLinks(R"([{"devices": [0, 1]}])"),
                "field 'links[0].kind': missing"},
        BadJson{"bad link kind", withLinks(R"([{"devices": [0, 1], "kind": "infiniband"}])"),
                "field 'links[0].kind': expected \"nvlink\" or \"pcie\", got \"infiniband\""},
        BadJson{"nvlink to a 3060", withLinks(R"([{"devices": [0, 1], "kind": "nvlink"}])"),
                "field 'links[0].kind': device 1 (rtx3060-12g) has no NVLink"},
        BadJson{"two bridges on one 3090",
                R"({"devices": [{"builtin": "rtx3090"}, {"builtin": "rtx3090"}, {"builtin": "rtx3090"}],
                    "links": [{"devices": [0, 1], "kind": "nvlink"}, {"devices": [0, 2], "kind": "nvlink"}]})",
                "field 'links[1].devices': device 0 (rtx3090) would have NVLink links to 2 devices"},
        BadJson{"negative link bandwidth",
                withLinks(R"([{"devices": [0, 1], "kind": "pcie", "bandwidth_gbps": -25}])"),
                "field 'links[0].bandwidth_gbps': expected a positive number, got -25"},
        BadJson{"negative latency",
                withLinks(R"([{"devices": [0, 1], "kind": "pcie", "latency_us": -1}])"),
                "field 'links[0].latency_us': expected a number >= 0, got -1"},
        BadJson{"unknown link field",
                withLinks(R"([{"devices": [0, 1], "kind": "pcie", "bandwidth": 25}])"),
                "field 'links[0].bandwidth': unknown field; did you mean 'bandwidth_gbps'?"},
        BadJson{"host not an object", withHost("[]"), "field 'host': expected an object"},
        BadJson{"host ram negative", withHost(R"({"ram_gb": -1})"),
                "field 'host.ram_gb': expected a positive number, got -1"},
        BadJson{"host pcie wrong length", withHost(R"({"pcie_bandwidth_gbps": [25, 25, 25]})"),
                "field 'host.pcie_bandwidth_gbps': expected 2 values, one per device, got 3"},
        BadJson{"host pcie bad element", withHost(R"({"pcie_bandwidth_gbps": [25, "x"]})"),
                "field 'host.pcie_bandwidth_gbps[1]': expected a number, got \"x\""},
        BadJson{"host pcie zero", withHost(R"({"pcie_bandwidth_gbps": 0})"),
                "field 'host.pcie_bandwidth_gbps': expected a positive number, got 0"},
        BadJson{"host unknown field", withHost(R"({"ram": 64})"),
                "field 'host.ram': unknown field; did you mean 'ram_gb'?"}),
    [](const ::testing::TestParamInfo<BadJson> &info) {
      std::string name;
      for (char c : std::string(info.param.what))
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

//===----------------------------------------------------------------------===//
// Transfers and capacity
//===----------------------------------------------------------------------===//

TEST(TopologyTest, TransferSecondsOverADirectLink) {
  Topology t = parseOk("2xrtx3090:nvlink");
  EXPECT_DOUBLE_EQ(t.transferSeconds(0, 1, 1000000000), 5e-6 + 1e9 / 56.25e9);
  EXPECT_DOUBLE_EQ(t.transferSeconds(1, 0, 1000000000), 5e-6 + 1e9 / 56.25e9);
  EXPECT_EQ(t.transferSeconds(1, 1, 1000000000), 0);
  EXPECT_DOUBLE_EQ(t.transferSeconds(0, 1, 0), 5e-6);
  Topology pcie = parseOk("rtx3090+rtx3060");
  // One hidden vector of Llama-3.1-8B in fp16.
  EXPECT_DOUBLE_EQ(pcie.transferSeconds(0, 1, 8192), 10e-6 + 8192 / 25e9);
}

TEST(TopologyTest, TransferSecondsThroughTheHost) {
  Topology t = parseJsonOk(R"({"devices": [{"builtin": "rtx3090"}, {"builtin": "rtx3060"}],
      "host": {"pcie_bandwidth_gbps": [25, 12.5], "pcie_latency_us": 10}})");
  EXPECT_EQ(t.link(0, 1), nullptr);
  EXPECT_FALSE(t.allPairsNVLink());
  EXPECT_DOUBLE_EQ(t.transferSeconds(0, 1, 1000000000),
                   2 * 10e-6 + 1e9 / 25e9 + 1e9 / 12.5e9);
  EXPECT_DOUBLE_EQ(t.transferSeconds(1, 0, 1000000000),
                   2 * 10e-6 + 1e9 / 25e9 + 1e9 / 12.5e9);
}

TEST(TopologyTest, LinkPicksTheFastestOfSeveral) {
  Topology t = parseOk("2xh200");
  LinkProfile nv;
  nv.a = 1;
  nv.b = 0;
  nv.kind = LinkKind::NVLink;
  nv.bandwidth = 450e9;
  nv.latency = 5e-6;
  t.links.push_back(nv);
  ASSERT_NE(t.link(0, 1), nullptr);
  EXPECT_EQ(t.link(0, 1)->kind, LinkKind::NVLink);
  EXPECT_TRUE(t.allPairsNVLink());
}

TEST(TopologyTest, UsableBytesWithCapsAndReserve) {
  DeviceProfile d = builtin("rtx3090");
  EXPECT_EQ(d.usableBytes(), 24576 * MiB - 512 * MiB);
  d.memoryCapBytes = 10000000000u;
  EXPECT_EQ(d.usableBytes(), 10000000000u - 512 * MiB);
  d.memoryCapBytes = 100 * GiB; // above physical: no effect
  EXPECT_EQ(d.usableBytes(), 24576 * MiB - 512 * MiB);
  d.memoryCapBytes = 256 * MiB; // below the reserve: saturates
  EXPECT_EQ(d.usableBytes(), 0u);
  d.memoryCapBytes.reset();
  d.contextReserveBytes = 0;
  EXPECT_EQ(d.usableBytes(), 24576 * MiB);
}

TEST(TopologyTest, MemoryCaps) {
  Topology t = parseOk("rtx3090+rtx3060");
  capOk(t, "10GB");
  EXPECT_EQ(t.devices[0].memoryCapBytes, std::optional<uint64_t>(10000000000u));
  EXPECT_EQ(t.devices[1].memoryCapBytes, std::optional<uint64_t>(10000000000u));

  capOk(t, "0=20GB,1=10.5GiB");
  EXPECT_EQ(t.devices[0].memoryCapBytes, std::optional<uint64_t>(20000000000u));
  EXPECT_EQ(t.devices[1].memoryCapBytes, std::optional<uint64_t>(10 * GiB + GiB / 2));
  EXPECT_EQ(t.devices[1].usableBytes(), 10 * GiB + GiB / 2 - 512 * MiB);

  // A bare size for every device, indexed ones win; units are case-blind.
  capOk(t, " 1 = 8gib , 6000MiB ");
  EXPECT_EQ(t.devices[0].memoryCapBytes, std::optional<uint64_t>(6000 * MiB));
  EXPECT_EQ(t.devices[1].memoryCapBytes, std::optional<uint64_t>(8 * GiB));

  // Above physical: kept, no effect.
  capOk(t, "0=100GB");
  EXPECT_EQ(t.devices[0].usableBytes(), 24576 * MiB - 512 * MiB);
  EXPECT_EQ(t.devices[1].memoryCapBytes, std::optional<uint64_t>(8 * GiB)); // untouched
  EXPECT_TRUE(parseOk("2xrtx3090").identicalDevices());
  Topology pair = parseOk("2xrtx3090");
  capOk(pair, "0=12GB");
  EXPECT_TRUE(pair.identicalDevices()); // caps aside

}

struct BadCap {
  const char *caps;
  const char *expected; // substring of the message
};

void PrintTo(const BadCap &b, std::ostream *os) { *os << b.caps; }

class TopologyBadCapTest : public ::testing::TestWithParam<BadCap> {};

TEST_P(TopologyBadCapTest, GivesOneLineErrorNamingThePiece) {
  Topology t = parseOk("rtx3090+rtx3060");
  capOk(t, "1=9GB");
  Topology before = t;
  llvm::Error e = applyMemoryCaps(t, GetParam().caps);
  ASSERT_TRUE(bool(e)) << GetParam().caps;
  std::string msg = oneLine(std::move(e));
  EXPECT_EQ(msg.rfind("--memory-cap", 0), 0u) << msg;
  EXPECT_NE(msg.find(GetParam().expected), std::string::npos) << msg;
  EXPECT_TRUE(t == before) << "a failed --memory-cap changed the topology";
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, TopologyBadCapTest,
    ::testing::Values(
        BadCap{"", "empty value"},
        BadCap{"10", "'10': expected a size such as 10GB"},
        BadCap{"10TB", "'10TB': expected a size"},
        BadCap{"abc", "'abc': expected a size"},
        BadCap{"GB", "'GB': expected a size"},
        BadCap{"-5GB", "'-5GB': expected a size"},
        BadCap{"1e3GB", "'1e3GB': expected a size"},
        BadCap{"1.2.3GB", "'1.2.3GB': expected a size"},
        BadCap{".5GB", "'.5GB': expected a size"},
        BadCap{"0GB", "'0GB': expected a size"},
        BadCap{"99999999999GiB", "'99999999999GiB': expected a size"},
        BadCap{"0=", "'0=': expected a size"},
        BadCap{"x=10GB", "'x=10GB': expected a device index before '='"},
        BadCap{"-1=10GB", "'-1=10GB': expected a device index"},
        BadCap{"2=10GB", "'2=10GB': device index 2 is out of range (the topology has 2 devices)"},
        BadCap{"0=10GB,0=12GB", "'0=12GB': a second cap for device 0"},
        BadCap{"10GB,12GB", "'12GB': a second cap for every device"},
        BadCap{"10GB,,1=5GB", "empty entry between commas"},
        BadCap{"0=10GB,1=100MB", "'1=100MB': leaves nothing on device 1 (rtx3060-12g) after its "
                                 "512.0 MiB context reserve"},
        BadCap{"1=5GB,\n", "empty entry"},
        BadCap{"0=1\x1b[31mGB", "'0=1\\x1b[31mGB': expected a size"}));

} // namespace
} // namespace hardware
} // namespace weft

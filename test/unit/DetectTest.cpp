// weft-detect's detection and topology JSON, against a fake NVML
// (test/detect/FakeNvml.cpp) describing boxes we do not have, read back
// through the compiler's topology parser.
#include "runtime/detect/Detect.h"
#include "compiler/Hardware/Topology.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace weft;
using namespace weft::detect;

namespace {

constexpr uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

// Detects the box described by boxes/<box>.json.
StatusOr<Detection> detectBox(const std::string &box) {
  std::string path = std::string(WEFT_NVML_BOXES_DIR) + "/" + box + ".json";
  setenv("WEFT_FAKE_NVML", path.c_str(), 1);
  auto nvml = Nvml::load(WEFT_FAKE_NVML);
  if (!nvml.isOk())
    return nvml.status();
  return weft::detect::detect(**nvml, 64 * GiB);
}

hardware::Topology parsed(const Detection &d) {
  StatusOr<std::string> json = topologyJson(d, WriteOptions{});
  EXPECT_TRUE(json.isOk()) << json.status().message();
  llvm::Expected<hardware::Topology> t = hardware::parseTopologyJson(*json, "detected.json");
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError()) << "\n" << *json;
    return {};
  }
  return std::move(*t);
}

} // namespace

TEST(Detect, EveryKnownPartIsInTheDatabase) {
  for (const std::string &key : knownBuiltinKeys()) {
    llvm::Expected<hardware::DeviceProfile> d = hardware::getBuiltinDevice(key);
    EXPECT_TRUE(bool(d)) << key << ": " << (d ? "" : llvm::toString(d.takeError()));
  }
}

TEST(Detect, PartNamesAndVariants) {
  EXPECT_EQ(builtinDeviceFor("NVIDIA GeForce RTX 3090", 24576 * MiB), "rtx3090");
  EXPECT_EQ(builtinDeviceFor("GeForce RTX 3090", 24576 * MiB), "rtx3090"); // older drivers
  EXPECT_EQ(builtinDeviceFor("NVIDIA GeForce RTX 3090 Ti", 24564 * MiB), "");
  EXPECT_EQ(builtinDeviceFor("NVIDIA GeForce RTX 3060", 12288 * MiB), "rtx3060-12g");
  EXPECT_EQ(builtinDeviceFor("NVIDIA GeForce RTX 3060", 8192 * MiB), "");
  EXPECT_EQ(builtinDeviceFor("NVIDIA GeForce RTX 4060 Ti", 8188 * MiB), "");
  EXPECT_EQ(builtinDeviceFor("NVIDIA H100 80GB HBM3", 81559 * MiB), "h100-sxm");
  EXPECT_EQ(builtinDeviceFor("NVIDIA H200", 143771 * MiB), "h200");
}

TEST(Detect, PcieRates) {
  EXPECT_NEAR(pcieBandwidth(4, 16), 25e9, 1e6); // the short forms' default
  EXPECT_NEAR(pcieBandwidth(4, 4), 6.25e9, 1e6);
  EXPECT_NEAR(pcieBandwidth(5, 16), 50e9, 0.1e9);
  EXPECT_NEAR(pcieBandwidth(3, 16), 12.5e9, 0.1e9);
  EXPECT_EQ(pcieBandwidth(0, 16), 0);
}

TEST(Detect, DesktopWithDisplayAndChipsetSlot) {
  StatusOr<Detection> d = detectBox("rtx3090+rtx3060");
  ASSERT_TRUE(d.isOk()) << d.status().message();
  ASSERT_EQ(d->gpus.size(), 2u);
  EXPECT_EQ(d->driverVersion, "560.35.03");
  EXPECT_EQ(d->gpus[0].builtin, "rtx3090");
  EXPECT_EQ(d->gpus[1].builtin, "rtx3060-12g");
  EXPECT_TRUE(d->gpus[0].displayActive);
  EXPECT_EQ(d->gpus[1].pcieWidth, 4u);
  EXPECT_TRUE(d->peerToPeer.empty());

  hardware::Topology t = parsed(*d);
  ASSERT_EQ(t.devices.size(), 2u);
  EXPECT_EQ(t.devices[0].name, "rtx3090");
  EXPECT_EQ(t.devices[0].memoryBytes, 24576 * MiB);
  // The display's 1126 MiB plus the 512 MiB reserve, rounded up to 64 MiB.
  EXPECT_EQ(t.devices[0].contextReserveBytes, 1664 * MiB);
  EXPECT_EQ(t.devices[1].contextReserveBytes, hardware::kDefaultContextReserve);
  // No peer-to-peer: no direct link, copies are staged through the host,
  // and the x4 slot is a quarter of x16.
  EXPECT_TRUE(t.links.empty());
  ASSERT_EQ(t.host.pcieBandwidth.size(), 2u);
  EXPECT_NEAR(t.host.pcieBandwidth[0], 25e9, 1e7);
  EXPECT_NEAR(t.host.pcieBandwidth[1], 6.25e9, 1e7);
  EXPECT_EQ(t.host.ramBytes, 64 * GiB);

  WriteOptions noReserve;
  noReserve.displayReserve = false;
  StatusOr<std::string> json = topologyJson(*d, noReserve);
  ASSERT_TRUE(json.isOk());
  llvm::Expected<hardware::Topology> t2 = hardware::parseTopologyJson(*json, "t.json");
  ASSERT_TRUE(bool(t2)) << llvm::toString(t2.takeError());
  EXPECT_EQ(t2->devices[0].contextReserveBytes, hardware::kDefaultContextReserve);
}

TEST(Detect, NvLinkBridge) {
  StatusOr<Detection> d = detectBox("2xrtx3090-nvlink");
  ASSERT_TRUE(d.isOk()) << d.status().message();
  ASSERT_EQ(d->nvlinks.size(), 1u);
  EXPECT_EQ(d->nvlinks[0].links, 4u);
  hardware::Topology t = parsed(*d);
  ASSERT_EQ(t.links.size(), 1u);
  EXPECT_EQ(t.links[0].kind, hardware::LinkKind::NVLink);
  EXPECT_NEAR(t.links[0].bandwidth, 56.25e9, 1e6);
  EXPECT_TRUE(t.allPairsNVLink());
  EXPECT_NEAR(t.host.pcieBandwidth[1], 12.5e9, 1e7); // x8
}

TEST(Detect, CalibrationWritesMeasuredFiguresTheCompilerReads) {
  StatusOr<Detection> d = detectBox("2xrtx3090-nvlink");
  ASSERT_TRUE(d.isOk()) << d.status().message();
  Calibration c;
  c.gpus.resize(2);
  for (GpuMeasurement &g : c.gpus) {
    g.copyBandwidth = 850e9;
    g.gemmFlops = 60e12;
    g.launchSeconds = 2e-6;
    g.hostToDevice = 24e9;
    g.seconds = 1.5;
  }
  c.pairs.push_back({0, 1, true, 50e9, 8e-6});
  AllReduceMeasurement a;
  a.gpus = {0, 1};
  a.method = "NCCL 2.27.3, CUDA graph";
  a.times = {{8192, 14e-6}, {32768, 15e-6}, {33554432, 700e-6}};
  c.allReduces.push_back(a);
  WriteOptions o;
  o.calibration = &c;
  o.date = "2026-12-01";
  StatusOr<std::string> json = topologyJson(*d, o);
  ASSERT_TRUE(json.isOk()) << json.status().message();
  llvm::Expected<hardware::Topology> t = hardware::parseTopologyJson(*json, "detected.json");
  ASSERT_TRUE(bool(t)) << llvm::toString(t.takeError()) << "\n" << *json;
  ASSERT_TRUE(t->devices[1].calibration.has_value());
  EXPECT_EQ(t->devices[1].calibration->copyBandwidth, 850e9);
  EXPECT_EQ(t->links[0].bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(t->links[0].latency, 8e-6);
  EXPECT_EQ(t->host.pcieBandwidth[0], 24e9);
  const hardware::AllReduceCalibration *m = t->allReduceFor({1, 0});
  ASSERT_NE(m, nullptr) << *json;
  EXPECT_EQ(m->method, a.method);
  ASSERT_EQ(m->times.size(), 3u);
  EXPECT_EQ(m->times[2].bytes, 33554432u);
  EXPECT_DOUBLE_EQ(m->times[0].seconds, 14e-6);
}

TEST(Detect, NvSwitchBoard) {
  StatusOr<Detection> d = detectBox("8xh100-nvswitch");
  ASSERT_TRUE(d.isOk()) << d.status().message();
  ASSERT_EQ(d->gpus.size(), 8u);
  EXPECT_EQ(d->nvlinks.size(), 28u);
  hardware::Topology t = parsed(*d);
  ASSERT_EQ(t.devices.size(), 8u);
  EXPECT_EQ(t.devices[0].name, "h100-sxm");
  EXPECT_TRUE(t.allPairsNVLink());
  for (const hardware::LinkProfile &l : t.links)
    EXPECT_NEAR(l.bandwidth, 450e9, 1e6); // 18 links x 25 GB/s
}

TEST(Detect, UnknownPartsAreDescribedFromNvml) {
  StatusOr<Detection> d = detectBox("unknown-parts");
  ASSERT_TRUE(d.isOk()) << d.status().message();
  EXPECT_EQ(d->gpus[0].builtin, "");
  EXPECT_EQ(d->gpus[1].builtin, ""); // the 8 GB RTX 3060 is another part
  hardware::Topology t = parsed(*d);
  ASSERT_EQ(t.devices.size(), 2u);
  const hardware::DeviceProfile &g = t.devices[0];
  EXPECT_EQ(g.name, "rtx-5090");
  EXPECT_EQ(g.computeCapability, 120);
  EXPECT_EQ(g.smCount, 170);
  // 14001 MHz x 2 x 512 bits = 1792 GB/s; 170 SMs x 512 x 2.407 GHz.
  EXPECT_NEAR(g.memoryBandwidth, 1792e9, 1e9);
  EXPECT_NEAR(g.fp16TensorFlops, 209.5e12, 0.2e12);
  EXPECT_GT(g.fp8TensorFlops, 0);
  EXPECT_EQ(t.devices[1].name, "rtx-3060");
  EXPECT_NEAR(t.devices[1].memoryBandwidth, 240e9, 0.1e9);
  EXPECT_EQ(t.devices[1].fp8TensorFlops, 0); // sm_86 has none
  ASSERT_EQ(t.links.size(), 1u);
  EXPECT_EQ(t.links[0].kind, hardware::LinkKind::PCIe);
  EXPECT_NEAR(t.links[0].bandwidth, 12.5e9, 0.1e9); // the slower slot (4.0 x8)
}

TEST(Detect, Errors) {
  StatusOr<Detection> none = detectBox("no-gpus");
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().message(), "no NVIDIA GPU found (NVML reports none)");

  StatusOr<Detection> driver = detectBox("driver-not-loaded");
  ASSERT_FALSE(driver.isOk());
  EXPECT_NE(driver.status().message().find("NVML could not start (Driver Not Loaded (9))"),
            std::string::npos)
      << driver.status().message();

  StatusOr<Detection> noClocks = detectBox("unknown-no-clocks");
  ASSERT_TRUE(noClocks.isOk()) << noClocks.status().message();
  StatusOr<std::string> json = topologyJson(*noClocks, WriteOptions{});
  ASSERT_FALSE(json.isOk());
  EXPECT_NE(json.status().message().find("GPU 0 (NVIDIA Mystery Accelerator) is not in Weft's "
                                         "database and NVML gives no memory clock or bus width"),
            std::string::npos)
      << json.status().message();

  auto missing = Nvml::load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.status().message().find("cannot load NVML"), std::string::npos);
  EXPECT_NE(missing.status().message().find("is the NVIDIA driver installed?"),
            std::string::npos);
}

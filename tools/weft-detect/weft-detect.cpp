// weft-detect: reads the GPUs of this machine through NVML and writes the
// topology JSON weft-compile --topology takes (docs/topology.md), so a plan
// can be compiled for exactly this box. Needs the NVIDIA driver, not a GPU
// context: it runs next to a server that holds the GPUs.
#include "runtime/base/Text.h"
#include "runtime/detect/Detect.h"
#ifdef WEFT_HAVE_CALIBRATE
#include "runtime/detect/Calibrate.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <unistd.h>

namespace {

constexpr const char *kUsage =
    "usage: weft-detect [-o FILE] [--calibrate] [--name NAME] [--no-display-reserve]\n"
    "                   [--nvml LIBRARY]\n"
    "\n"
    "Reads this machine's NVIDIA GPUs through NVML (name, memory, compute capability,\n"
    "PCIe generation and width, NVLink links, peer-to-peer access, displays) and\n"
    "writes the topology JSON for weft-compile --topology FILE. Parts in Weft's\n"
    "database start from their built-in profile; others are described from NVML.\n"
    "\n"
    "  -o FILE               write the JSON to FILE (default: stdout)\n"
    "  --calibrate           also measure each GPU (device copy bandwidth, cuBLASLt FP16\n"
    "                        GEMM rate, CUDA graph node time, host copies) and each pair\n"
    "                        (peer copies) and NCCL all-reduces per GPU group, into\n"
    "                        \"calibration\" blocks, the links and \"all_reduce\";\n"
    "                        the GPUs must be idle. Step scales come from\n"
    "                        weft-run --bench --write-calibration (docs/cost-model.md)\n"
    "  --name NAME           the topology's name in reports (default: this host's name)\n"
    "  --no-display-reserve  do not keep the memory a display uses free (default: a GPU\n"
    "                        that drives a display keeps what is in use now, plus the\n"
    "                        usual 512 MiB context reserve)\n"
    "  --nvml LIBRARY        the NVML library to load (default: libnvidia-ml.so.1; also\n"
    "                        $WEFT_NVML_LIBRARY)\n"
    "  -q, --quiet           no summary on stderr\n"
    "  --version             print the version and exit\n"
    "\n"
    "Devices are numbered in PCI bus order; run plans with CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
    "(or weft-run --devices) so that CUDA numbers them the same way.\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "weft-detect: error: %s\n", message.c_str());
  return 1;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0])
    return "detected";
  return buf;
}

} // namespace

int main(int argc, char **argv) {
  std::string output, library, name;
  bool quiet = false, calibrateFlag = false;
  weft::detect::WriteOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--version") {
      std::printf("weft-detect %s\n", WEFT_VERSION);
      return 0;
    } else if (arg == "-o") {
      if (!value(output) || output.empty())
        return fail("-o needs a file name");
    } else if (arg == "--name") {
      if (!value(name) || name.empty())
        return fail("--name needs a value");
    } else if (arg == "--nvml") {
      if (!value(library) || library.empty())
        return fail("--nvml needs a library path");
    } else if (arg == "--calibrate") {
      calibrateFlag = true;
    } else if (arg == "--no-display-reserve") {
      options.displayReserve = false;
    } else if (arg == "-q" || arg == "--quiet") {
      quiet = true;
    } else {
      return fail("unknown argument '" + arg + "' (see --help)");
    }
  }
  if (library.empty())
    if (const char *env = std::getenv("WEFT_NVML_LIBRARY"); env && *env)
      library = env;
  options.name = name.empty() ? hostName() : name;
  std::string date = weft::todayUtc();
  if (!date.empty())
    options.comment = "Detected on " + date + ".";

  auto nvml = weft::detect::Nvml::load(library);
  if (!nvml.isOk())
    return fail(nvml.status().message());
  auto detection = weft::detect::detect(**nvml, weft::detect::readHostRamBytes());
  if (!detection.isOk())
    return fail(detection.status().message());
#ifdef WEFT_HAVE_CALIBRATE
  std::optional<weft::detect::Calibration> measured;
  if (calibrateFlag) {
    auto c = weft::detect::calibrate(*detection, [&](const std::string &what) {
      if (!quiet)
        std::fprintf(stderr, "weft-detect: calibrating %s...\n", what.c_str());
    });
    if (!c.isOk())
      return fail("--calibrate: " + c.status().message());
    measured = std::move(c.value());
    options.calibration = &*measured;
    options.date = date;
  }
#else
  if (calibrateFlag)
    return fail("--calibrate: this weft-detect was built without the CUDA toolkit");
#endif
  auto json = weft::detect::topologyJson(*detection, options);
  if (!json.isOk())
    return fail(json.status().message());

  if (output.empty()) {
    std::fputs(json->c_str(), stdout);
    if (std::fflush(stdout) != 0)
      return fail("could not write to stdout");
  } else {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    if (!out)
      return fail(output + ": cannot open for writing: " + std::strerror(errno));
    out << *json;
    out.close();
    if (!out)
      return fail(output + ": write failed");
  }
  if (!quiet) {
    std::fprintf(stderr, "weft-detect: %s", weft::detect::summary(*detection, options).c_str());
#ifdef WEFT_HAVE_CALIBRATE
    if (measured) {
      for (size_t i = 0; i < measured->gpus.size(); ++i) {
        const weft::detect::GpuMeasurement &m = measured->gpus[i];
        std::fprintf(stderr,
                     "  %zu  measured: copy %.0f GB/s, FP16 GEMM %.1f TFLOPS, graph node %.2f us, "
                     "host to device %.1f GB/s\n",
                     i, m.copyBandwidth / 1e9, m.gemmFlops / 1e12, m.launchSeconds * 1e6,
                     m.hostToDevice / 1e9);
      }
      for (const weft::detect::PairMeasurement &p : measured->pairs)
        std::fprintf(stderr, "  %d-%d  measured: %.1f GB/s, %.1f us%s\n", p.a, p.b,
                     p.bandwidth / 1e9, p.latency * 1e6,
                     p.peerToPeer ? " (peer to peer)" : " (through the host)");
      for (const weft::detect::AllReduceMeasurement &a : measured->allReduces) {
        std::string group;
        for (int g : a.gpus)
          group += (group.empty() ? "" : ",") + std::to_string(g);
        std::string times;
        for (const auto &[bytes, seconds] : a.times)
          times += " " + std::to_string(bytes >> 10) + " KiB " +
                   std::to_string(int(seconds * 1e7 + 0.5) / 10) + "." +
                   std::to_string(int(seconds * 1e7 + 0.5) % 10) + " us,";
        if (!times.empty())
          times.pop_back();
        std::fprintf(stderr, "  %s  all-reduce (%s):%s\n", group.c_str(), a.method.c_str(),
                     times.c_str());
      }
      if (!measured->allReduceSkipped.empty())
        std::fprintf(stderr, "  all-reduce not measured: %s\n",
                     measured->allReduceSkipped.c_str());
      std::fprintf(stderr, "weft-detect: calibrated in %.1f s\n", measured->seconds);
    }
#endif
    if (!output.empty())
      std::fprintf(stderr, "weft-detect: wrote %s; compile with weft-compile --topology %s\n",
                   output.c_str(), output.c_str());
  }
  return 0;
}

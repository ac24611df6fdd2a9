// Topology queries (links, transfer times, capacity) and the command-line
// forms: --topology short forms and --memory-cap values.
#include "compiler/Hardware/Topology.h"

#include "compiler/Support/Error.h"
#include "runtime/base/Text.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;

namespace weft {
namespace hardware {

namespace {

// Specs and caps come from the command line or files: every message stays
// on one line.
Error makeError(const llvm::Twine &msg) { return makeOneLineError(msg); }

std::string quoted(StringRef s) { return "'" + printableForMessage(s.str(), 80) + "'"; }

} // namespace

const char *linkKindName(LinkKind kind) {
  switch (kind) {
  case LinkKind::NVLink: return "nvlink";
  case LinkKind::PCIe: return "pcie";
  }
  return "unknown";
}

uint64_t DeviceProfile::usableBytes() const {
  uint64_t total = memoryBytes;
  if (memoryCapBytes)
    total = std::min(total, *memoryCapBytes);
  return total > contextReserveBytes ? total - contextReserveBytes : 0;
}

std::string DeviceProfile::smArch() const {
  return "sm_" + std::to_string(computeCapability);
}

const LinkProfile *Topology::link(int a, int b) const {
  const LinkProfile *best = nullptr;
  for (const LinkProfile &l : links)
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a))
      if (!best || l.bandwidth > best->bandwidth)
        best = &l;
  return best;
}

double Topology::transferSeconds(int a, int b, uint64_t bytes) const {
  assert(a >= 0 && b >= 0 && size_t(a) < devices.size() &&
         size_t(b) < devices.size() && "device index out of range");
  if (a == b)
    return 0;
  if (const LinkProfile *l = link(a, b))
    return l->latency + double(bytes) / l->bandwidth;
  // Without a direct link the runtime stages through pinned host memory: a
  // full copy up, then a full copy down. The hops are not overlapped, which
  // is what a copy of one buffer without chunking costs.
  auto hop = [&](int d) {
    double bw = size_t(d) < host.pcieBandwidth.size() ? host.pcieBandwidth[d]
                                                      : kDefaultPCIeBandwidth;
    return host.pcieLatency + double(bytes) / bw;
  };
  return hop(a) + hop(b);
}

bool Topology::identicalDevices() const {
  for (const DeviceProfile &d : devices)
    if (d.name != devices[0].name ||
        d.computeCapability != devices[0].computeCapability ||
        d.memoryBytes != devices[0].memoryBytes)
      return false;
  return true;
}

bool Topology::allPairsNVLink() const {
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = i + 1; j < devices.size(); ++j) {
      const LinkProfile *l = link(int(i), int(j));
      // link() returns the fastest; an NVLink slower than a PCIe link on the
      // same pair is not possible in parsed topologies (one link per pair).
      if (!l || l->kind != LinkKind::NVLink)
        return false;
    }
  return true;
}

bool operator==(const StepScale &x, const StepScale &y) {
  return x.tokens == y.tokens && x.weights == y.weights && x.attention == y.attention;
}

bool operator==(const DeviceCalibration &x, const DeviceCalibration &y) {
  return x.gpu == y.gpu && x.driver == y.driver && x.date == y.date &&
         x.seconds == y.seconds && x.smClockMHz == y.smClockMHz &&
         x.memoryClockMHz == y.memoryClockMHz && x.copyBandwidth == y.copyBandwidth &&
         x.gemmFlops == y.gemmFlops && x.launchSeconds == y.launchSeconds &&
         x.steps == y.steps && x.prefillSteps == y.prefillSteps;
}

bool operator==(const DeviceProfile &x, const DeviceProfile &y) {
  return x.name == y.name && x.description == y.description &&
         x.computeCapability == y.computeCapability &&
         x.memoryBytes == y.memoryBytes && x.memoryBandwidth == y.memoryBandwidth &&
         x.fp16TensorFlops == y.fp16TensorFlops &&
         x.bf16TensorFlops == y.bf16TensorFlops &&
         x.fp8TensorFlops == y.fp8TensorFlops && x.int8TensorOps == y.int8TensorOps &&
         x.fp32Flops == y.fp32Flops && x.smCount == y.smCount &&
         x.l2Bytes == y.l2Bytes && x.contextReserveBytes == y.contextReserveBytes &&
         x.memoryCapBytes == y.memoryCapBytes &&
         x.nvlinkBandwidth == y.nvlinkBandwidth &&
         x.nvlinkGroupSize == y.nvlinkGroupSize && x.calibration == y.calibration;
}

bool operator==(const LinkProfile &x, const LinkProfile &y) {
  return x.a == y.a && x.b == y.b && x.kind == y.kind &&
         x.bandwidth == y.bandwidth && x.latency == y.latency;
}

bool operator==(const HostProfile &x, const HostProfile &y) {
  return x.ramBytes == y.ramBytes && x.pcieBandwidth == y.pcieBandwidth &&
         x.pcieLatency == y.pcieLatency;
}

bool operator==(const AllReduceTiming &x, const AllReduceTiming &y) {
  return x.bytes == y.bytes && x.seconds == y.seconds;
}

bool operator==(const AllReduceCalibration &x, const AllReduceCalibration &y) {
  return x.devices == y.devices && x.method == y.method && x.times == y.times;
}

bool operator==(const Topology &x, const Topology &y) {
  return x.name == y.name && x.devices == y.devices && x.links == y.links &&
         x.host == y.host && x.allReduces == y.allReduces;
}

double AllReduceCalibration::secondsFor(uint64_t bytes) const {
  assert(!times.empty() && "an all-reduce calibration without times");
  if (bytes <= times.front().bytes)
    return times.front().seconds;
  for (size_t i = 1; i < times.size(); ++i)
    if (bytes <= times[i].bytes) {
      const AllReduceTiming &lo = times[i - 1], &hi = times[i];
      double f = double(bytes - lo.bytes) / double(hi.bytes - lo.bytes);
      return lo.seconds + f * (hi.seconds - lo.seconds);
    }
  const AllReduceTiming &last = times.back();
  return last.seconds * double(bytes) / double(last.bytes);
}

const AllReduceCalibration *Topology::allReduceFor(llvm::ArrayRef<int> group) const {
  std::vector<int> sorted(group.begin(), group.end());
  std::sort(sorted.begin(), sorted.end());
  for (const AllReduceCalibration &c : allReduces)
    if (c.devices == sorted)
      return &c;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Short forms
//===----------------------------------------------------------------------===//

Expected<Topology> parseTopologySpec(StringRef spec) {
  StringRef s = spec.trim();
  if (s.empty())
    return makeError("topology '': empty (expected e.g. h200, 2xrtx3090:nvlink, "
                     "rtx3090+rtx3060-12g or a .json file)");
  if (s.ends_with_insensitive(".json") || llvm::sys::fs::is_regular_file(s))
    return readTopologyFile(s);

  std::string where = "topology " + quoted(s) + ": ";
  std::string lower = s.lower();
  llvm::SmallVector<StringRef, 8> groups;
  StringRef(lower).split(groups, '+', /*MaxSplit=*/-1, /*KeepEmpty=*/true);

  Topology t;
  // The name goes into reports and JSON files: no control characters.
  t.name = printableForMessage(s.str(), 1000);
  // For each device, the group it came from and whether that group is joined
  // by NVLink.
  std::vector<size_t> groupOf;
  std::vector<bool> groupNVLink;
  for (StringRef group : groups) {
    group = group.trim();
    if (group.empty())
      return makeError(where + "empty device group (expected e.g. 2xrtx3090 "
                               "between '+' signs)");
    auto [devicePart, suffix] = group.split(':');
    devicePart = devicePart.trim();
    suffix = suffix.trim();
    bool hasSuffix = group.contains(':');

    // Optional "<count>x" prefix; device names never start with a digit.
    int64_t count = 1;
    size_t digits = devicePart.find_first_not_of("0123456789");
    if (digits != 0 && digits != StringRef::npos && devicePart[digits] == 'x') {
      if (devicePart.take_front(digits).getAsInteger(10, count) || count < 1 ||
          count > kMaxDevices)
        return makeError(where + llvm::formatv("device count in {0} must be 1 to {1}",
                                               quoted(group), kMaxDevices));
      devicePart = devicePart.drop_front(digits + 1);
    }
    Expected<DeviceProfile> device = getBuiltinDevice(devicePart);
    if (!device)
      return makeError(where + llvm::toString(device.takeError()));

    bool nvlink = false;
    if (hasSuffix) {
      if (suffix == "nvlink") {
        nvlink = true;
      } else if (suffix != "pcie") {
        return makeError(where + "unknown link kind " + quoted(suffix) + " in " +
                         quoted(group) + " (expected nvlink or pcie)");
      }
    }
    if (nvlink && !device->hasNVLink())
      return makeError(where + device->name + " has no NVLink");
    if (nvlink && count > device->nvlinkGroupSize)
      return makeError(where + llvm::formatv(
                                   "an NVLink group of {0} holds at most {1} "
                                   "devices, got {2}",
                                   device->name, device->nvlinkGroupSize, count));
    if (t.devices.size() + size_t(count) > size_t(kMaxDevices))
      return makeError(where + llvm::formatv("more than {0} devices", kMaxDevices));
    for (int64_t i = 0; i < count; ++i) {
      t.devices.push_back(*device);
      groupOf.push_back(groupNVLink.size());
    }
    groupNVLink.push_back(nvlink);
  }

  size_t n = t.devices.size();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      LinkProfile l;
      l.a = int(i);
      l.b = int(j);
      if (groupOf[i] == groupOf[j] && groupNVLink[groupOf[i]]) {
        l.kind = LinkKind::NVLink;
        l.bandwidth = std::min(t.devices[i].nvlinkBandwidth,
                               t.devices[j].nvlinkBandwidth);
        l.latency = kDefaultNVLinkLatency;
      } else {
        l.kind = LinkKind::PCIe;
        l.bandwidth = kDefaultPCIeBandwidth;
        l.latency = kDefaultPCIeLatency;
      }
      t.links.push_back(l);
    }
  t.host.ramBytes = kDefaultHostRam;
  t.host.pcieBandwidth.assign(n, kDefaultPCIeBandwidth);
  t.host.pcieLatency = kDefaultPCIeLatency;
  return t;
}

//===----------------------------------------------------------------------===//
// Memory caps
//===----------------------------------------------------------------------===//

namespace {

// "10GB", "10.5 GiB", "512MiB": a plain decimal number and a unit, so no
// locale, exponent or hex form can sneak in.
std::optional<uint64_t> parseCapSize(StringRef text) {
  text = text.trim();
  size_t numEnd = text.find_first_not_of("0123456789.");
  if (numEnd == 0 || numEnd == StringRef::npos)
    return std::nullopt;
  StringRef number = text.take_front(numEnd);
  StringRef unit = text.drop_front(numEnd).trim();
  if (number.count('.') > 1 || number.front() == '.' || number.back() == '.')
    return std::nullopt;
  double scale;
  if (unit.equals_insensitive("gb"))
    scale = 1e9;
  else if (unit.equals_insensitive("gib"))
    scale = double(1ull << 30);
  else if (unit.equals_insensitive("mb"))
    scale = 1e6;
  else if (unit.equals_insensitive("mib"))
    scale = double(1ull << 20);
  else
    return std::nullopt;
  double value;
  if (number.getAsDouble(value))
    return std::nullopt;
  double bytes = std::round(value * scale);
  if (!(bytes >= 1) || bytes > double(1ull << 60))
    return std::nullopt;
  return uint64_t(bytes);
}

std::string formatMiB(uint64_t bytes) {
  return llvm::formatv("{0:F1} MiB", double(bytes) / double(1ull << 20)).str();
}

} // namespace

Error applyMemoryCaps(Topology &topology, StringRef caps) {
  StringRef all = caps.trim();
  const char *expected = "expected a size such as 10GB, 10.5GiB, 512MB or 512MiB, "
                         "optionally after a device index as in 1=10GB";
  if (all.empty())
    return makeError(llvm::Twine("--memory-cap: empty value (") + expected + ")");
  llvm::SmallVector<StringRef, 8> pieces;
  all.split(pieces, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);

  // Each cap keeps the piece it came from, for messages.
  struct Cap {
    uint64_t bytes;
    std::string piece;
  };
  std::optional<Cap> everyDevice;
  std::map<size_t, Cap> perDevice;
  for (StringRef rawPiece : pieces) {
    StringRef piece = rawPiece.trim();
    std::string where = "--memory-cap " + quoted(piece) + ": ";
    if (piece.empty())
      return makeError("--memory-cap " + quoted(all) + ": empty entry between commas");
    auto [left, right] = piece.split('=');
    bool indexed = piece.contains('=');
    std::optional<uint64_t> bytes = parseCapSize(indexed ? right : left);
    if (!bytes)
      return makeError(where + expected);
    if (!indexed) {
      if (everyDevice)
        return makeError(where + "a second cap for every device");
      everyDevice = Cap{*bytes, piece.str()};
      continue;
    }
    uint64_t index;
    if (left.trim().getAsInteger(10, index))
      return makeError(where + "expected a device index before '='");
    if (index >= topology.devices.size())
      return makeError(where + llvm::formatv("device index {0} is out of range "
                                             "(the topology has {1} device{2})",
                                             index, topology.devices.size(),
                                             topology.devices.size() == 1 ? "" : "s"));
    if (!perDevice.emplace(size_t(index), Cap{*bytes, piece.str()}).second)
      return makeError(where + llvm::formatv("a second cap for device {0}", index));
  }

  // Check every device before changing any, so a bad value leaves the
  // topology as it was.
  std::vector<std::optional<uint64_t>> newCaps;
  for (size_t i = 0; i < topology.devices.size(); ++i) {
    const DeviceProfile &d = topology.devices[i];
    auto it = perDevice.find(i);
    const Cap *cap = it != perDevice.end() ? &it->second
                                           : (everyDevice ? &*everyDevice : nullptr);
    if (!cap) {
      newCaps.push_back(d.memoryCapBytes);
      continue;
    }
    if (std::min(cap->bytes, d.memoryBytes) <= d.contextReserveBytes)
      return makeError("--memory-cap " + quoted(cap->piece) + ": " +
                       llvm::formatv("leaves nothing on device {0} ({1}) after "
                                     "its {2} context reserve",
                                     i, d.name, formatMiB(d.contextReserveBytes)));
    newCaps.push_back(cap->bytes);
  }
  for (size_t i = 0; i < topology.devices.size(); ++i)
    topology.devices[i].memoryCapBytes = newCaps[i];
  return Error::success();
}

} // namespace hardware
} // namespace weft

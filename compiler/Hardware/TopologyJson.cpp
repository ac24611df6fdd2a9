// Reading and writing topology JSON files (format: docs/topology.md), with a
// one-line error naming the file and field for every malformed input.
#include "compiler/Hardware/Topology.h"

#include "compiler/Support/JsonFields.h"
#include "runtime/base/Text.h"
#include "runtime/detect/Detect.h"
#include "runtime/io/ReadFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
namespace json = llvm::json;

namespace weft {
namespace hardware {
namespace {

// File contents are untrusted: every message stays on one line.
Error makeError(const llvm::Twine &msg) { return makeOneLineError(msg); }

std::string describe(const json::Value &v) { return describeJson(v); }

// A rate or time, written in a unit (key `unitKey`, value x 10^shift in SI)
// or, where the unit cannot say a value exactly, in SI (key `siKey`).
struct Quantity {
  const char *unitKey;
  const char *siKey;
  int shift;
};
constexpr Quantity kMemoryBandwidth{"memory_bandwidth_gbps", "memory_bandwidth_bytes_per_s", 9};
constexpr Quantity kFp16{"fp16_tflops", "fp16_flops", 12};
constexpr Quantity kBf16{"bf16_tflops", "bf16_flops", 12};
constexpr Quantity kFp8{"fp8_tflops", "fp8_flops", 12};
constexpr Quantity kInt8{"int8_tops", "int8_ops", 12};
constexpr Quantity kFp32{"fp32_tflops", "fp32_flops", 12};
constexpr Quantity kNVLinkBandwidth{"nvlink_bandwidth_gbps", "nvlink_bandwidth_bytes_per_s", 9};
constexpr Quantity kLinkBandwidth{"bandwidth_gbps", "bandwidth_bytes_per_s", 9};
constexpr Quantity kLinkLatency{"latency_us", "latency_s", -6};
constexpr Quantity kPCIeBandwidth{"pcie_bandwidth_gbps", "pcie_bandwidth_bytes_per_s", 9};
constexpr Quantity kPCIeLatency{"pcie_latency_us", "pcie_latency_s", -6};
constexpr Quantity kCopyBandwidth{"copy_bandwidth_gbps", "copy_bandwidth_bytes_per_s", 9};
constexpr Quantity kGemm{"gemm_tflops", "gemm_flops", 12};
constexpr Quantity kLaunch{"launch_us", "launch_s", -6};
constexpr Quantity kAllReduceTime{"us", "seconds", -6};
// A measurement above the datasheet by more than this is not of this part.
constexpr double kCalibrationMargin = 1.2;

// The shortest "%.*e" text that reads back as `y`.
std::string shortestScientific(double y) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, y);
    if (std::strtod(buf, nullptr) == y)
      break;
  }
  return buf;
}

// y x 10^shift, rounded once from the decimal y was written as: 66.9 TFLOPS
// is exactly the double nearest 66.9e12 (y * 1e12 can be an ulp off, and
// then no decimal in TFLOPS would print it back exactly).
double shiftDecimal(double y, int shift) {
  if (shift == 0 || y == 0 || !std::isfinite(y))
    return y;
  std::string s = shortestScientific(y);
  size_t e = s.find('e');
  int exponent = std::atoi(s.c_str() + e + 1) + shift;
  return std::strtod((s.substr(0, e) + "e" + std::to_string(exponent)).c_str(), nullptr);
}

// Digits d1 d2 ... as the value d1.d2... x 10^exponent, in plain notation
// unless very large or small.
std::string decimalText(std::string digits, int exponent) {
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  int n = int(digits.size());
  int point = exponent + 1; // digits before the decimal point
  if (point > 21 || point < -6)
    return digits.substr(0, 1) + (n > 1 ? "." + digits.substr(1) : "") + "e" +
           std::to_string(exponent);
  if (point <= 0)
    return "0." + std::string(size_t(-point), '0') + digits;
  if (point >= n)
    return digits + std::string(size_t(point - n), '0');
  return digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
}

// `x` (SI) as the shortest decimal in the unit 10^shift that parses back to
// exactly `x`, or nothing when that takes more than 15 digits (two such
// decimals could read as the same double, so exactness is not certain).
std::optional<std::string> unitText(double x, int shift) {
  if (x == 0)
    return std::string("0");
  if (!(x > 0) || !std::isfinite(x))
    return std::nullopt;
  char buf[40];
  for (int digits = 1; digits <= 15; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, x);
    if (std::strtod(buf, nullptr) != x)
      continue;
    StringRef text(buf);
    size_t e = text.find('e');
    std::string mantissa;
    for (char c : text.take_front(e))
      if (llvm::isDigit(c))
        mantissa += c;
    std::string out = decimalText(mantissa, std::atoi(buf + e + 1) - shift);
    if (shiftDecimal(std::strtod(out.c_str(), nullptr), shift) == x)
      return out;
  }
  return std::nullopt;
}

std::string siText(double x) {
  if (!std::isfinite(x))
    return "null"; // only from a topology built in code; reads as absent
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// Size fields are written <base><suffix>, with exactly one suffix.
struct SizeSuffix {
  const char *suffix;
  double scale;
};
constexpr SizeSuffix kSizeSuffixes[] = {{"_gb", 1e9},
                                        {"_gib", double(1ull << 30)},
                                        {"_mb", 1e6},
                                        {"_mib", double(1ull << 20)},
                                        {"_bytes", 1.0}};
constexpr double kMaxBytes = double(1ull << 60);

// Reads the fields of one JSON object, naming the file and field path in
// every error.
class ObjectReader : public JsonFields {
public:
  ObjectReader(const json::Object &obj, StringRef file, std::string prefix)
      : JsonFields(obj, file, std::move(prefix)) {}

  // Rejects keys outside `plain` and `sizes` (size bases, each with any
  // suffix), so that a misspelt optional field is not silently ignored.
  Error rejectUnknown(llvm::ArrayRef<StringRef> plain, llvm::ArrayRef<StringRef> sizes,
                      llvm::ArrayRef<Quantity> quantities = {}) const {
    std::vector<std::string> allowed;
    for (StringRef p : plain)
      allowed.push_back(p.str());
    for (const Quantity &q : quantities) {
      allowed.push_back(q.unitKey);
      allowed.push_back(q.siKey);
    }
    for (StringRef s : sizes)
      for (const SizeSuffix &suffix : kSizeSuffixes)
        allowed.push_back(s.str() + suffix.suffix);
    std::vector<std::string> unknown;
    for (const auto &kv : obj)
      if (std::find(allowed.begin(), allowed.end(), kv.first.str()) == allowed.end())
        unknown.push_back(kv.first.str());
    if (unknown.empty())
      return Error::success();
    std::sort(unknown.begin(), unknown.end()); // deterministic message
    StringRef bad = unknown.front();
    // Suggest a field that adds a unit to the key ("bandwidth" ->
    // "bandwidth_gbps"), else the closest spelling.
    std::string best;
    std::string withUnit = bad.str() + "_";
    for (const std::string &a : allowed)
      if (best.empty() && StringRef(a).starts_with(withUnit))
        best = a;
    unsigned bestDistance = 4; // suggest only close spellings
    for (const std::string &a : allowed) {
      if (!best.empty() && StringRef(best).starts_with(withUnit))
        break;
      unsigned d = bad.edit_distance(a, /*AllowReplacements=*/true, bestDistance);
      if (d < bestDistance) {
        bestDistance = d;
        best = a;
      }
    }
    return error(bad, best.empty() ? std::string("unknown field (see docs/topology.md)")
                                   : "unknown field; did you mean '" + best + "'?");
  }

  // `v` (the value of `field`) times 10^shift, i.e. in SI.
  Expected<double> number(StringRef field, const json::Value &v, int shift,
                          bool allowZero) const {
    std::optional<double> d = v.getAsNumber();
    if (!d)
      return error(field, "expected a number, got " + describe(v));
    bool bad = !std::isfinite(*d) || *d < 0 || (!allowZero && *d == 0);
    double x = bad ? 0 : shiftDecimal(*d, shift);
    if (bad || !std::isfinite(x) || (!allowZero && x == 0))
      return error(field, (allowZero ? "expected a number >= 0, got "
                                     : "expected a positive number, got ") +
                              describe(v));
    return x;
  }

  // The value of `q` in either of its keys (not both), with the key used.
  Expected<std::pair<const json::Value *, std::string>> quantityValue(const Quantity &q) const {
    const json::Value *unitValue = get(q.unitKey), *siValue = get(q.siKey);
    if (unitValue && siValue)
      return error(q.siKey, "conflicts with '" + path(q.unitKey) + "' (give one of them)");
    if (unitValue)
      return std::make_pair(unitValue, std::string(q.unitKey));
    return std::make_pair(siValue, std::string(q.siKey));
  }

  Expected<std::optional<double>> optQuantity(const Quantity &q, bool allowZero) const {
    WEFT_ASSIGN_OR_RETURN(found, quantityValue(q));
    if (!found.first)
      return std::optional<double>();
    int shift = found.second == q.unitKey ? q.shift : 0;
    WEFT_ASSIGN_OR_RETURN(x, number(found.second, *found.first, shift, allowZero));
    return std::optional<double>(x);
  }

  // A size given as <base>_bytes (an integer), _gb, _gib, _mb or _mib; at
  // most one of them. `usedField` receives the key that was given.
  Expected<std::optional<uint64_t>> optSize(StringRef base, bool allowZero,
                                            std::string *usedField = nullptr) const {
    const json::Value *found = nullptr;
    std::string field;
    double scale = 1;
    for (const SizeSuffix &s : kSizeSuffixes) {
      std::string key = base.str() + s.suffix;
      const json::Value *v = get(key);
      if (!v)
        continue;
      if (found)
        return error(key, "conflicts with '" + path(field) + "' (give one of them)");
      found = v;
      field = key;
      scale = s.scale;
    }
    if (!found)
      return std::optional<uint64_t>();
    if (usedField)
      *usedField = field;
    const char *expected = allowZero ? "expected a number >= 0, got "
                                     : "expected a positive number, got ";
    double bytes;
    if (scale == 1) {
      std::optional<int64_t> i = found->getAsInteger();
      if (!i)
        return error(field, "expected a whole number of bytes, got " + describe(*found));
      if (*i < 0 || (!allowZero && *i == 0))
        return error(field, expected + describe(*found));
      bytes = double(*i);
    } else {
      std::optional<double> d = found->getAsNumber();
      if (!d)
        return error(field, "expected a number, got " + describe(*found));
      if (!std::isfinite(*d) || *d < 0 || (!allowZero && *d == 0))
        return error(field, expected + describe(*found));
      bytes = std::round(*d * scale);
      if (!allowZero && bytes < 1)
        return error(field, "less than one byte: " + describe(*found));
    }
    if (bytes > kMaxBytes)
      return error(field, "too large: " + describe(*found));
    if (scale == 1)
      return std::optional<uint64_t>(uint64_t(*found->getAsInteger()));
    return std::optional<uint64_t>(uint64_t(bytes));
  }
};

// Device names appear in reports, file names and command lines.
bool isValidDeviceName(StringRef s) {
  if (s.empty() || s.size() > 64)
    return false;
  for (char c : s)
    if (!llvm::isAlnum(c) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

bool hasControlChars(StringRef s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return true;
  return false;
}

Error checkFreeText(const ObjectReader &r, StringRef field, StringRef s) {
  if (s.size() > 1024)
    return r.error(field, llvm::formatv("longer than 1024 bytes ({0})", s.size()));
  if (hasControlChars(s))
    return r.error(field, "contains control characters");
  return Error::success();
}

const StringRef kDeviceFields[] = {"builtin",  "name",     "description", "compute_capability",
                                   "sm_count", "nvlink_group_size", "comment", "calibration"};

// A device's "calibration" block (docs/topology.md), checked against the
// figures of the device it is written in: a measurement from another part,
// or beyond what the part can do, is refused.
Expected<DeviceCalibration> parseCalibration(const json::Value &value, const std::string &entry,
                                             StringRef file, const DeviceProfile &d) {
  std::string where = entry + ".calibration";
  const json::Object *obj = value.getAsObject();
  if (!obj)
    return makeError(llvm::Twine(file) + ": field '" + where + "': expected an object, got " +
                     describe(value));
  ObjectReader r(*obj, file, where + ".");
  if (Error e = r.rejectUnknown({"gpu", "driver", "date", "seconds", "sm_clock_mhz",
                                 "memory_clock_mhz", "steps", "prefill_steps", "comment"},
                                {},
                                {kCopyBandwidth, kGemm, kLaunch}))
    return std::move(e);
  DeviceCalibration c;
  WEFT_ASSIGN_OR_RETURN(gpu, r.optString("gpu"));
  if (!gpu || gpu->empty())
    return r.error("gpu", "missing (the GPU measured, as NVML names it)");
  if (Error e = checkFreeText(r, "gpu", *gpu))
    return std::move(e);
  c.gpu = *gpu;
  // A device of the database must be calibrated on that part.
  if (getBuiltinDevice(d.name)) {
    std::string part = detect::builtinDeviceFor(c.gpu, d.memoryBytes);
    if (part.empty())
      part = detect::builtinDeviceFor(c.gpu, 0); // the same name, another memory size
    if (part != d.name)
      return r.error("gpu", "'" + printableForMessage(c.gpu, 96) + "' is " +
                                (part.empty() ? std::string("not a ") + d.name
                                              : "a " + part + ", not a " + d.name) +
                                ": calibrate on the device this entry describes");
  } else {
    llvm::consumeError(getBuiltinDevice(d.name).takeError());
  }
  for (const char *field : {"driver", "date"}) {
    WEFT_ASSIGN_OR_RETURN(text, r.optString(field));
    if (text) {
      if (Error e = checkFreeText(r, field, *text))
        return std::move(e);
      (StringRef(field) == "driver" ? c.driver : c.date) = *text;
    }
  }
  if (r.get("seconds")) {
    WEFT_ASSIGN_OR_RETURN(seconds, r.optPositive("seconds"));
    c.seconds = *seconds;
  }
  WEFT_ASSIGN_OR_RETURN(smClock, r.optInt("sm_clock_mhz", 1, 100000));
  if (smClock)
    c.smClockMHz = int(*smClock);
  WEFT_ASSIGN_OR_RETURN(memClock, r.optInt("memory_clock_mhz", 1, 100000));
  if (memClock)
    c.memoryClockMHz = int(*memClock);
  auto measured = [&](const Quantity &q, double datasheet, const char *what,
                      double &out) -> Error {
    Expected<std::optional<double>> v = r.optQuantity(q, false);
    if (!v)
      return v.takeError();
    if (!*v)
      return Error::success();
    if (datasheet > 0 && **v > datasheet * kCalibrationMargin)
      return r.error(q.unitKey,
                     llvm::formatv("{0} is more than {1}% above the {2} of {3} ({4}): "
                                   "measured on another GPU?",
                                   describe(r.get(q.unitKey) ? *r.get(q.unitKey)
                                                             : *r.get(q.siKey)),
                                   int((kCalibrationMargin - 1) * 100 + 0.5), what, d.name,
                                   datasheet));
    out = **v;
    return Error::success();
  };
  if (Error e = measured(kCopyBandwidth, d.memoryBandwidth, "memory bandwidth (bytes/s)",
                         c.copyBandwidth))
    return std::move(e);
  if (Error e = measured(kGemm, std::max(d.fp16TensorFlops, d.bf16TensorFlops),
                         "FP16/BF16 tensor rate (FLOP/s)", c.gemmFlops))
    return std::move(e);
  if (Error e = measured(kLaunch, 1e-3, "plausible launch time (s)", c.launchSeconds))
    return std::move(e);

  for (const char *key : {"steps", "prefill_steps"}) {
    const json::Value *steps = r.get(key);
    if (!steps)
      continue;
    std::vector<StepScale> &out = StringRef(key) == "steps" ? c.steps : c.prefillSteps;
    const json::Array *list = steps->getAsArray();
    if (!list)
      return r.error(key, "expected a list, got " + describe(*steps));
    for (size_t i = 0; i < list->size(); ++i) {
      std::string item = where + "." + key + "[" + std::to_string(i) + "]";
      const json::Object *o = (*list)[i].getAsObject();
      if (!o)
        return makeError(llvm::Twine(file) + ": field '" + item + "': expected an object, got " +
                         describe((*list)[i]));
      ObjectReader s(*o, file, item + ".");
      if (Error e = s.rejectUnknown({"tokens", "weights_scale", "attention_scale", "comment"}, {}))
        return std::move(e);
      StepScale step;
      WEFT_ASSIGN_OR_RETURN(tokens, s.reqInt("tokens", 1, 1 << 20));
      step.tokens = tokens;
      if (!out.empty() && out.back().tokens >= tokens)
        return s.error("tokens", llvm::formatv("expected more than the previous entry's {0} "
                                               "(steps ascend by tokens)",
                                               out.back().tokens));
      for (const char *field : {"weights_scale", "attention_scale"}) {
        WEFT_ASSIGN_OR_RETURN(scale, s.optPositive(field));
        if (!scale)
          return s.error(field, "missing (measured over predicted time)");
        if (*scale < 0.2 || *scale > 5)
          return s.error(field, llvm::formatv("expected 0.2 to 5 (measured over predicted), "
                                              "got {0}",
                                              *scale));
        (StringRef(field) == "weights_scale" ? step.weights : step.attention) = *scale;
      }
      out.push_back(step);
    }
  }
  return c;
}
const StringRef kDeviceSizes[] = {"memory", "l2", "context_reserve", "memory_cap"};
const Quantity kDeviceQuantities[] = {kMemoryBandwidth, kFp16, kFp32, kBf16, kFp8,
                                      kInt8, kNVLinkBandwidth};

Expected<DeviceProfile> parseDevice(const json::Value &value, size_t index,
                                    StringRef file) {
  std::string entry = "devices[" + std::to_string(index) + "]";
  const json::Object *obj = value.getAsObject();
  if (!obj)
    return makeError(llvm::Twine(file) + ": field '" + entry +
                     "': expected an object, got " + describe(value));
  ObjectReader r(*obj, file, entry + ".");
  if (Error e = r.rejectUnknown(kDeviceFields, kDeviceSizes, kDeviceQuantities))
    return std::move(e);
  WEFT_ASSIGN_OR_RETURN(comment, r.optString("comment"));
  (void)comment;

  WEFT_ASSIGN_OR_RETURN(builtin, r.optString("builtin"));
  DeviceProfile d;
  bool custom = !builtin;
  if (builtin) {
    Expected<DeviceProfile> b = getBuiltinDevice(*builtin);
    if (!b)
      return r.error("builtin", llvm::toString(b.takeError()));
    d = std::move(*b);
  } else {
    d.contextReserveBytes = kDefaultContextReserve;
  }
  auto missing = [&](StringRef field) {
    return r.error(field, "missing (required for a device without \"builtin\")");
  };

  WEFT_ASSIGN_OR_RETURN(name, r.optString("name"));
  if (name) {
    if (!isValidDeviceName(*name))
      return r.error("name", "expected 1 to 64 letters, digits, '.', '_' or '-', got " +
                                 describe(*r.get("name")));
    d.name = *name;
  } else if (custom) {
    return missing("name");
  }
  WEFT_ASSIGN_OR_RETURN(description, r.optString("description"));
  if (description) {
    if (Error e = checkFreeText(r, "description", *description))
      return std::move(e);
    d.description = *description;
  } else if (custom) {
    d.description = d.name;
  }

  if (const json::Value *cc = r.get("compute_capability")) {
    // People write 8.6; the field is major * 10 + minor as in sm_86.
    std::optional<double> n = cc->getAsNumber();
    if (n && *n > 0 && *n < 20 && !cc->getAsInteger())
      return r.error("compute_capability",
                     "expected major * 10 + minor, e.g. 86 for 8.6, got " + describe(*cc));
  }
  WEFT_ASSIGN_OR_RETURN(cc, r.optInt("compute_capability", 30, 199));
  if (cc)
    d.computeCapability = int(*cc);
  else if (custom)
    return missing("compute_capability");

  std::string memoryField = "memory_gb";
  WEFT_ASSIGN_OR_RETURN(memory, r.optSize("memory", /*allowZero=*/false, &memoryField));
  if (memory)
    d.memoryBytes = *memory;
  else if (custom)
    return missing("memory_gb");

  WEFT_ASSIGN_OR_RETURN(bandwidth, r.optQuantity(kMemoryBandwidth, false));
  if (bandwidth)
    d.memoryBandwidth = *bandwidth;
  else if (custom)
    return missing("memory_bandwidth_gbps");

  WEFT_ASSIGN_OR_RETURN(fp16, r.optQuantity(kFp16, false));
  if (fp16)
    d.fp16TensorFlops = *fp16;
  else if (custom)
    return missing("fp16_tflops");

  WEFT_ASSIGN_OR_RETURN(bf16, r.optQuantity(kBf16, false));
  if (bf16)
    d.bf16TensorFlops = *bf16;
  else if (custom)
    d.bf16TensorFlops = d.fp16TensorFlops; // the same tensor path on sm_80+

  WEFT_ASSIGN_OR_RETURN(fp8, r.optQuantity(kFp8, true));
  if (fp8)
    d.fp8TensorFlops = *fp8;
  WEFT_ASSIGN_OR_RETURN(int8, r.optQuantity(kInt8, true));
  if (int8)
    d.int8TensorOps = *int8;
  WEFT_ASSIGN_OR_RETURN(fp32, r.optQuantity(kFp32, true));
  if (fp32)
    d.fp32Flops = *fp32;
  WEFT_ASSIGN_OR_RETURN(sms, r.optInt("sm_count", 0, 1 << 20));
  if (sms)
    d.smCount = int(*sms);
  WEFT_ASSIGN_OR_RETURN(l2, r.optSize("l2", /*allowZero=*/true));
  if (l2)
    d.l2Bytes = *l2;
  std::string reserveField = "context_reserve_bytes";
  WEFT_ASSIGN_OR_RETURN(reserve, r.optSize("context_reserve", true, &reserveField));
  if (reserve)
    d.contextReserveBytes = *reserve;
  std::string capField;
  WEFT_ASSIGN_OR_RETURN(cap, r.optSize("memory_cap", false, &capField));
  if (cap)
    d.memoryCapBytes = *cap;

  WEFT_ASSIGN_OR_RETURN(nvlinkBw, r.optQuantity(kNVLinkBandwidth, true));
  if (nvlinkBw)
    d.nvlinkBandwidth = *nvlinkBw;
  WEFT_ASSIGN_OR_RETURN(group, r.optInt("nvlink_group_size", 0, 1024));
  if (d.nvlinkBandwidth == 0) {
    if (group && *group != 0)
      return r.error("nvlink_group_size", "must be 0 when nvlink_bandwidth_gbps is 0");
    d.nvlinkGroupSize = 0; // e.g. a builtin 3090 declared without its bridge
  } else if (group) {
    if (*group < 2)
      return r.error("nvlink_group_size",
                     llvm::formatv("expected at least 2 with NVLink, got {0}", *group));
    d.nvlinkGroupSize = int(*group);
  } else if (d.nvlinkGroupSize < 2) {
    d.nvlinkGroupSize = 2; // one bridge joins two devices
  }

  if (const json::Value *calibration = r.get("calibration")) {
    WEFT_ASSIGN_OR_RETURN(c, parseCalibration(*calibration, entry, file, d));
    d.calibration = std::move(c);
  }

  // Checks across fields, once every override is in.
  if (d.fp8TensorFlops > 0 && d.computeCapability < 89) {
    std::string msg = llvm::formatv("compute capability {0} ({1}) has no FP8 "
                                    "(sm_89 and later have it)",
                                    d.computeCapability, d.smArch());
    return fp8 ? r.error("fp8_tflops", "expected 0: " + msg)
               : r.error("compute_capability", msg + ", but fp8_tflops is not 0");
  }
  if (d.usableBytes() == 0)
    return r.error(cap ? StringRef(capField) : StringRef(reserveField),
                   llvm::formatv("leaves no usable memory ({0} bytes of memory{1}, "
                                 "{2} bytes reserved for the CUDA context)",
                                 d.memoryBytes,
                                 cap ? ", cap " + std::to_string(*cap) : std::string(),
                                 d.contextReserveBytes));
  return d;
}

Error parseLinks(const json::Value &value, StringRef file, Topology &t) {
  const json::Array *list = value.getAsArray();
  if (!list)
    return makeError(llvm::Twine(file) + ": field 'links': expected a list, got " +
                     describe(value));
  size_t n = t.devices.size();
  std::map<std::pair<int, int>, size_t> seen;
  std::vector<int> nvlinkPeers(n, 0);
  for (size_t i = 0; i < list->size(); ++i) {
    std::string entry = "links[" + std::to_string(i) + "]";
    const json::Object *obj = (*list)[i].getAsObject();
    if (!obj)
      return makeError(llvm::Twine(file) + ": field '" + entry +
                       "': expected an object, got " + describe((*list)[i]));
    ObjectReader r(*obj, file, entry + ".");
    if (Error e = r.rejectUnknown({"devices", "kind", "comment"}, {},
                                  {kLinkBandwidth, kLinkLatency}))
      return e;
    WEFT_ASSIGN_OR_RETURN(comment, r.optString("comment"));
    (void)comment;

    const json::Value *ends = r.get("devices");
    if (!ends)
      return r.error("devices", "missing (expected two device indices such as [0, 1])");
    const json::Array *pair = ends->getAsArray();
    if (!pair || pair->size() != 2 || !(*pair)[0].getAsInteger() ||
        !(*pair)[1].getAsInteger())
      return r.error("devices",
                     "expected two device indices such as [0, 1], got " + describe(*ends));
    int64_t a = *(*pair)[0].getAsInteger(), b = *(*pair)[1].getAsInteger();
    for (int64_t e : {a, b})
      if (e < 0 || e >= int64_t(n))
        return r.error("devices", llvm::formatv("device index {0} is out of range "
                                                "(the topology has {1} device{2})",
                                                e, n, n == 1 ? "" : "s"));
    if (a == b)
      return r.error("devices", llvm::formatv("a link from device {0} to itself", a));
    auto key = std::make_pair(int(std::min(a, b)), int(std::max(a, b)));
    auto [it, inserted] = seen.emplace(key, i);
    if (!inserted)
      return r.error("devices", llvm::formatv("devices {0} and {1} are already "
                                              "linked by links[{2}]",
                                              key.first, key.second, it->second));

    LinkProfile l;
    l.a = int(a);
    l.b = int(b);
    WEFT_ASSIGN_OR_RETURN(kind, r.optString("kind"));
    if (!kind)
      return r.error("kind", "missing (expected \"nvlink\" or \"pcie\")");
    if (*kind == "nvlink")
      l.kind = LinkKind::NVLink;
    else if (*kind == "pcie")
      l.kind = LinkKind::PCIe;
    else
      return r.error("kind", "expected \"nvlink\" or \"pcie\", got " +
                                 describe(*r.get("kind")));
    if (l.kind == LinkKind::NVLink) {
      for (int64_t e : {a, b}) {
        const DeviceProfile &d = t.devices[e];
        if (!d.hasNVLink())
          return r.error("kind", llvm::formatv("device {0} ({1}) has no NVLink "
                                               "(nvlink_bandwidth_gbps is 0)",
                                               e, d.name));
        if (++nvlinkPeers[e] > d.nvlinkGroupSize - 1)
          return r.error("devices",
                         llvm::formatv("device {0} ({1}) would have NVLink links to "
                                       "{2} devices; its NVLink group holds at most "
                                       "{3} devices",
                                       e, d.name, nvlinkPeers[e], d.nvlinkGroupSize));
      }
    }
    WEFT_ASSIGN_OR_RETURN(bandwidth, r.optQuantity(kLinkBandwidth, false));
    WEFT_ASSIGN_OR_RETURN(latency, r.optQuantity(kLinkLatency, true));
    if (l.kind == LinkKind::NVLink) {
      l.bandwidth = bandwidth.value_or(
          std::min(t.devices[a].nvlinkBandwidth, t.devices[b].nvlinkBandwidth));
      l.latency = latency.value_or(kDefaultNVLinkLatency);
    } else {
      l.bandwidth = bandwidth.value_or(kDefaultPCIeBandwidth);
      l.latency = latency.value_or(kDefaultPCIeLatency);
    }
    t.links.push_back(l);
  }
  return Error::success();
}

Error parseHost(const json::Value &value, StringRef file, Topology &t) {
  const json::Object *obj = value.getAsObject();
  if (!obj)
    return makeError(llvm::Twine(file) + ": field 'host': expected an object, got " +
                     describe(value));
  ObjectReader r(*obj, file, "host.");
  if (Error e = r.rejectUnknown({"comment"}, {"ram"}, {kPCIeBandwidth, kPCIeLatency}))
    return e;
  WEFT_ASSIGN_OR_RETURN(comment, r.optString("comment"));
  (void)comment;
  WEFT_ASSIGN_OR_RETURN(ram, r.optSize("ram", /*allowZero=*/false));
  if (ram)
    t.host.ramBytes = *ram;
  size_t n = t.devices.size();
  WEFT_ASSIGN_OR_RETURN(bw, r.quantityValue(kPCIeBandwidth));
  if (bw.first) {
    const std::string &key = bw.second;
    int shift = key == kPCIeBandwidth.unitKey ? kPCIeBandwidth.shift : 0;
    if (const json::Array *list = bw.first->getAsArray()) {
      if (list->size() != n)
        return r.error(key, llvm::formatv("expected {0} values, one per device, got {1}",
                                          n, list->size()));
      for (size_t i = 0; i < n; ++i) {
        WEFT_ASSIGN_OR_RETURN(x, r.number(key + "[" + std::to_string(i) + "]", (*list)[i],
                                          shift, false));
        t.host.pcieBandwidth[i] = x;
      }
    } else {
      WEFT_ASSIGN_OR_RETURN(x, r.number(key, *bw.first, shift, false));
      t.host.pcieBandwidth.assign(n, x);
    }
  }
  WEFT_ASSIGN_OR_RETURN(latency, r.optQuantity(kPCIeLatency, true));
  if (latency)
    t.host.pcieLatency = *latency;
  return Error::success();
}

// The top-level "all_reduce" list: per device group, all-reduce times at a
// few sizes (weft-detect --calibrate). A time faster than the group's
// slowest path allows (ring bus bandwidth above it by the calibration
// margin) is not a measurement of this box and is refused.
Error parseAllReduces(const json::Value &value, StringRef file, Topology &t) {
  const json::Array *list = value.getAsArray();
  if (!list)
    return makeError(llvm::Twine(file) + ": field 'all_reduce': expected a list, got " +
                     describe(value));
  size_t n = t.devices.size();
  for (size_t i = 0; i < list->size(); ++i) {
    std::string entry = "all_reduce[" + std::to_string(i) + "]";
    const json::Object *obj = (*list)[i].getAsObject();
    if (!obj)
      return makeError(llvm::Twine(file) + ": field '" + entry +
                       "': expected an object, got " + describe((*list)[i]));
    ObjectReader r(*obj, file, entry + ".");
    if (Error e = r.rejectUnknown({"devices", "method", "times", "comment"}, {}))
      return e;
    WEFT_ASSIGN_OR_RETURN(comment, r.optString("comment"));
    (void)comment;
    AllReduceCalibration c;
    const json::Value *group = r.get("devices");
    const json::Array *indices = group ? group->getAsArray() : nullptr;
    if (!indices || indices->size() < 2)
      return r.error("devices", "expected two or more device indices such as [0, 1], got " +
                                    (group ? describe(*group) : std::string("nothing")));
    for (const json::Value &v : *indices) {
      std::optional<int64_t> d = v.getAsInteger();
      if (!d || *d < 0 || *d >= int64_t(n))
        return r.error("devices", llvm::formatv("{0} is not a device index (the topology "
                                                "has {1} device{2})",
                                                describe(v), n, n == 1 ? "" : "s"));
      if (std::find(c.devices.begin(), c.devices.end(), int(*d)) != c.devices.end())
        return r.error("devices", llvm::formatv("device {0} is listed twice", *d));
      c.devices.push_back(int(*d));
    }
    std::sort(c.devices.begin(), c.devices.end());
    for (size_t k = 0; k < t.allReduces.size(); ++k)
      if (t.allReduces[k].devices == c.devices)
        return r.error("devices", llvm::formatv("the same group as all_reduce[{0}]", k));
    WEFT_ASSIGN_OR_RETURN(method, r.optString("method"));
    if (method) {
      if (Error e = checkFreeText(r, "method", *method))
        return e;
      c.method = *method;
    }
    // The ring's slowest hop bounds the rate any all-reduce reaches.
    double slowest = 0;
    for (size_t k = 0; k < c.devices.size(); ++k) {
      int a = c.devices[k], b = c.devices[(k + 1) % c.devices.size()];
      double rate = 1.0 / (t.transferSeconds(a, b, 1u << 30) / double(1u << 30));
      slowest = slowest == 0 ? rate : std::min(slowest, rate);
    }
    const json::Value *times = r.get("times");
    const json::Array *points = times ? times->getAsArray() : nullptr;
    if (!points || points->empty())
      return r.error("times", "expected a list of {\"bytes\": N, \"us\": T}, got " +
                                  (times ? describe(*times) : std::string("nothing")));
    double m = double(c.devices.size());
    for (size_t k = 0; k < points->size(); ++k) {
      std::string at = "times[" + std::to_string(k) + "]";
      const json::Object *p = (*points)[k].getAsObject();
      if (!p)
        return r.error(at, "expected an object such as {\"bytes\": 8192, \"us\": 12.5}, got " +
                               describe((*points)[k]));
      ObjectReader pr(*p, file, entry + "." + at + ".");
      if (Error e = pr.rejectUnknown({"bytes"}, {}, {kAllReduceTime}))
        return e;
      const json::Value *size = pr.get("bytes");
      if (!size)
        return pr.error("bytes", "missing (the size all-reduced)");
      std::optional<int64_t> bytes = size->getAsInteger();
      if (!bytes || *bytes <= 0 || double(*bytes) > kMaxBytes)
        return pr.error("bytes", "expected a positive whole number of bytes, got " +
                                     describe(*size));
      WEFT_ASSIGN_OR_RETURN(seconds, pr.optQuantity(kAllReduceTime, /*allowZero=*/false));
      if (!seconds)
        return pr.error("us", "missing (the time of one all-reduce)");
      if (!c.times.empty() && uint64_t(*bytes) <= c.times.back().bytes)
        return pr.error("bytes", llvm::formatv("{0} is not larger than the size before it "
                                               "({1}): sizes must ascend",
                                               *bytes, c.times.back().bytes));
      double bus = 2.0 * (m - 1) / m * double(*bytes) / *seconds;
      if (bus > kCalibrationMargin * slowest)
        return pr.error("us", llvm::formatv("{0} bytes in {1:f1} us is {2:f0} GB/s over the "
                                            "ring, above what its slowest link carries "
                                            "({3:f0} GB/s): not a measurement of this box",
                                            *bytes, *seconds * 1e6, bus / 1e9, slowest / 1e9));
      c.times.push_back({uint64_t(*bytes), *seconds});
    }
    t.allReduces.push_back(std::move(c));
  }
  return Error::success();
}

} // namespace

Expected<Topology> parseTopologyJson(StringRef text, StringRef displayName) {
  size_t bad = firstInvalidUtf8(std::string_view(text.data(), text.size()));
  if (bad != kAllValidUtf8)
    return makeError(llvm::Twine(displayName) + ": invalid UTF-8 at byte " +
                     llvm::Twine(uint64_t(bad)));
  if (weft::Status deep = weft::io::checkJsonNesting(std::string_view(text.data(), text.size()),
                                                    weft::io::kMaxJsonDepth, displayName.str());
      !deep.isOk())
    return makeError(deep.message());
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return makeError(llvm::Twine(displayName) + ": invalid JSON: " +
                     llvm::toString(parsed.takeError()));
  const json::Object *obj = parsed->getAsObject();
  if (!obj)
    return makeError(llvm::Twine(displayName) +
                     ": expected a JSON object at the top level");
  ObjectReader r(*obj, displayName, "");
  if (Error e = r.rejectUnknown({"name", "devices", "links", "host", "all_reduce", "comment"},
                                {}))
    return std::move(e);
  WEFT_ASSIGN_OR_RETURN(comment, r.optString("comment"));
  (void)comment;

  Topology t;
  WEFT_ASSIGN_OR_RETURN(name, r.optString("name"));
  if (name) {
    if (Error e = checkFreeText(r, "name", *name))
      return std::move(e);
    t.name = *name;
  } else {
    t.name = displayName.str();
  }

  const json::Value *devices = r.get("devices");
  if (!devices)
    return r.error("devices", "missing (expected a list of devices)");
  const json::Array *deviceList = devices->getAsArray();
  if (!deviceList)
    return r.error("devices", "expected a list, got " + describe(*devices));
  if (deviceList->empty() || deviceList->size() > size_t(kMaxDevices))
    return r.error("devices", llvm::formatv("expected 1 to {0} devices, got {1}",
                                            kMaxDevices, deviceList->size()));
  for (size_t i = 0; i < deviceList->size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(device, parseDevice((*deviceList)[i], i, displayName));
    t.devices.push_back(std::move(device));
  }

  t.host.ramBytes = kDefaultHostRam;
  t.host.pcieBandwidth.assign(t.devices.size(), kDefaultPCIeBandwidth);
  t.host.pcieLatency = kDefaultPCIeLatency;
  if (const json::Value *links = r.get("links"))
    if (Error e = parseLinks(*links, displayName, t))
      return std::move(e);
  if (const json::Value *host = r.get("host"))
    if (Error e = parseHost(*host, displayName, t))
      return std::move(e);
  if (const json::Value *allReduce = r.get("all_reduce"))
    if (Error e = parseAllReduces(*allReduce, displayName, t))
      return std::move(e);
  return t;
}

Expected<Topology> readTopologyFile(StringRef path) {
  // Type and size are checked before a byte is read (a FIFO does not block).
  weft::StatusOr<std::string> text =
      weft::io::readRegularFile(path.str(), 16u << 20, "the topology description");
  if (!text.isOk())
    return makeError(text.status().message());
  return parseTopologyJson(*text, path);
}

std::string topologyToJson(const Topology &t) {
  std::string out;
  llvm::raw_string_ostream os(out);
  json::OStream j(os, /*IndentSize=*/2);
  auto number = [&](const Quantity &q, double x) {
    std::optional<std::string> text = unitText(x, q.shift);
    j.attributeBegin(text ? q.unitKey : q.siKey);
    j.rawValue(text ? *text : siText(x));
    j.attributeEnd();
  };
  auto bytes = [&](StringRef key, uint64_t v) {
    j.attributeBegin(key);
    j.rawValue(std::to_string(v));
    j.attributeEnd();
  };
  j.object([&] {
    j.attribute("name", t.name);
    j.attributeArray("devices", [&] {
      for (const DeviceProfile &d : t.devices)
        j.object([&] {
          j.attribute("name", d.name);
          j.attribute("description", d.description);
          j.attribute("compute_capability", int64_t(d.computeCapability));
          bytes("memory_bytes", d.memoryBytes);
          number(kMemoryBandwidth, d.memoryBandwidth);
          number(kFp16, d.fp16TensorFlops);
          number(kBf16, d.bf16TensorFlops);
          number(kFp8, d.fp8TensorFlops);
          number(kInt8, d.int8TensorOps);
          number(kFp32, d.fp32Flops);
          j.attribute("sm_count", int64_t(d.smCount));
          bytes("l2_bytes", d.l2Bytes);
          bytes("context_reserve_bytes", d.contextReserveBytes);
          if (d.memoryCapBytes)
            bytes("memory_cap_bytes", *d.memoryCapBytes);
          number(kNVLinkBandwidth, d.nvlinkBandwidth);
          j.attribute("nvlink_group_size", int64_t(d.nvlinkGroupSize));
          if (const std::optional<DeviceCalibration> &c = d.calibration)
            j.attributeObject("calibration", [&] {
              j.attribute("gpu", c->gpu);
              if (!c->driver.empty())
                j.attribute("driver", c->driver);
              if (!c->date.empty())
                j.attribute("date", c->date);
              if (c->seconds > 0) {
                j.attributeBegin("seconds");
                j.rawValue(siText(c->seconds));
                j.attributeEnd();
              }
              if (c->smClockMHz > 0)
                j.attribute("sm_clock_mhz", int64_t(c->smClockMHz));
              if (c->memoryClockMHz > 0)
                j.attribute("memory_clock_mhz", int64_t(c->memoryClockMHz));
              if (c->copyBandwidth > 0)
                number(kCopyBandwidth, c->copyBandwidth);
              if (c->gemmFlops > 0)
                number(kGemm, c->gemmFlops);
              if (c->launchSeconds > 0)
                number(kLaunch, c->launchSeconds);
              for (const auto &entry :
                   {std::pair<const char *, const std::vector<StepScale> *>{"steps", &c->steps},
                    {"prefill_steps", &c->prefillSteps}})
                if (!entry.second->empty())
                j.attributeArray(entry.first, [&] {
                  for (const StepScale &st : *entry.second)
                    j.object([&] {
                      j.attribute("tokens", st.tokens);
                      j.attributeBegin("weights_scale");
                      j.rawValue(siText(st.weights));
                      j.attributeEnd();
                      j.attributeBegin("attention_scale");
                      j.rawValue(siText(st.attention));
                      j.attributeEnd();
                    });
                });
            });
        });
    });
    j.attributeArray("links", [&] {
      for (const LinkProfile &l : t.links)
        j.object([&] {
          j.attributeArray("devices", [&] {
            j.value(int64_t(l.a));
            j.value(int64_t(l.b));
          });
          j.attribute("kind", linkKindName(l.kind));
          number(kLinkBandwidth, l.bandwidth);
          number(kLinkLatency, l.latency);
        });
    });
    j.attributeObject("host", [&] {
      bytes("ram_bytes", t.host.ramBytes);
      // One unit for the whole list: GB/s unless some value needs SI.
      bool inUnit = true;
      for (double bw : t.host.pcieBandwidth)
        inUnit = inUnit && unitText(bw, kPCIeBandwidth.shift);
      j.attributeArray(inUnit ? kPCIeBandwidth.unitKey : kPCIeBandwidth.siKey, [&] {
        for (double bw : t.host.pcieBandwidth)
          j.rawValue(inUnit ? *unitText(bw, kPCIeBandwidth.shift) : siText(bw));
      });
      number(kPCIeLatency, t.host.pcieLatency);
    });
    if (!t.allReduces.empty())
      j.attributeArray("all_reduce", [&] {
        for (const AllReduceCalibration &c : t.allReduces)
          j.object([&] {
            j.attributeArray("devices", [&] {
              for (int d : c.devices)
                j.value(int64_t(d));
            });
            if (!c.method.empty())
              j.attribute("method", c.method);
            j.attributeArray("times", [&] {
              for (const AllReduceTiming &x : c.times)
                j.object([&] {
                  bytes("bytes", x.bytes);
                  number(kAllReduceTime, x.seconds);
                });
            });
          });
      });
  });
  os << "\n";
  return out;
}

#undef WEFT_ASSIGN_OR_RETURN

} // namespace hardware
} // namespace weft

// Untrusted text in messages: UTF-8 validation and a one-line rendering, so
// that no file content can break the "one line per error" rule.
#ifndef WEFT_RUNTIME_BASE_TEXT_H_
#define WEFT_RUNTIME_BASE_TEXT_H_

#include <cstddef>
#include <string>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace weft {

inline constexpr size_t kAllValidUtf8 = std::string_view::npos;

// Offset of the first byte that does not start a well-formed UTF-8 sequence,
// or kAllValidUtf8.
size_t firstInvalidUtf8(std::string_view s);

// `s` with every byte that could break a line (C0/C1 controls, DEL,
// U+2028/U+2029) or is not UTF-8 written as \xNN, cut after `maxBytes`.
std::string printableForMessage(std::string_view s, size_t maxBytes = 160);

// The whole of `s` as a base-10 integer in [lo, hi]: digits only (and a
// leading '-' where lo < 0), no spaces, no '+', no overflow; nullopt
// otherwise ("10abc", "2^40+5" and " 7" are not numbers).
std::optional<int64_t> parseInteger(std::string_view s, int64_t lo, int64_t hi);
// The whole of `s` as a finite decimal number in [lo, hi] ("1.5", "2e3";
// not "inf", "nan", hex or surrounding spaces); nullopt otherwise.
std::optional<double> parseDecimal(std::string_view s, double lo, double hi);
// Comma-separated integers in [lo, hi], each as parseInteger takes it; at
// least one; nullopt if any is not.
std::optional<std::vector<int64_t>> parseIntegerList(std::string_view s, int64_t lo, int64_t hi);

// Today's date in UTC, "2026-12-01" (calibration records), or "" when the
// clock cannot say.
std::string todayUtc();

} // namespace weft

#endif // WEFT_RUNTIME_BASE_TEXT_H_

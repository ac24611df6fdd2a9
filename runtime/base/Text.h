// Untrusted text in messages: UTF-8 validation and a one-line rendering, so
// that no file content can break the "one line per error" rule.
#ifndef WEFT_RUNTIME_BASE_TEXT_H_
#define WEFT_RUNTIME_BASE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace weft {

inline constexpr size_t kAllValidUtf8 = std::string_view::npos;

// Offset of the first byte that does not start a well-formed UTF-8 sequence,
// or kAllValidUtf8.
size_t firstInvalidUtf8(std::string_view s);

// `s` with every byte that could break a line (C0/C1 controls, DEL,
// U+2028/U+2029) or is not UTF-8 written as \xNN, cut after `maxBytes`.
std::string printableForMessage(std::string_view s, size_t maxBytes = 160);

} // namespace weft

#endif // WEFT_RUNTIME_BASE_TEXT_H_

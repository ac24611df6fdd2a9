// UTF-8 checks and one-line rendering of untrusted text for error messages.
#include "runtime/base/Text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>

namespace weft {

// Length of the well-formed UTF-8 sequence at s[i] (Unicode table 3-7: no
// overlongs, surrogates or code points past U+10FFFF), or 0.
static size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80)
    return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c == 0xE0) {
    len = 3;
    lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    len = 3;
  } else if (c == 0xED) {
    len = 3;
    hi = 0x9F;
  } else if (c == 0xF0) {
    len = 4;
    lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    len = 4;
  } else if (c == 0xF4) {
    len = 4;
    hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < len || byte(i + 1) < lo || byte(i + 1) > hi)
    return 0;
  for (size_t k = 2; k < len; ++k)
    if ((byte(i + k) & 0xC0) != 0x80)
      return 0;
  return len;
}

size_t firstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = utf8SequenceLength(s, i);
    if (len == 0)
      return i;
    i += len;
  }
  return kAllValidUtf8;
}

static void appendHex(std::string &out, unsigned char c) {
  static const char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 15];
}

// Makes untrusted text safe for a one-line message: anything that could break
// the line (C0/C1 controls, DEL, U+2028/U+2029) or is not UTF-8 becomes \xNN,
// and long text is cut.
std::string printableForMessage(std::string_view s, size_t maxBytes) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (out.size() >= maxBytes) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = utf8SequenceLength(s, i);
    bool breaksLine =
        len == 0 || (len == 1 && (c < 0x20 || c == 0x7F)) ||
        (len == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) ||
        (len == 3 && c == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
         (static_cast<unsigned char>(s[i + 2]) & 0xFE) == 0xA8);
    if (len == 0)
      len = 1;
    if (breaksLine) {
      for (size_t k = 0; k < len; ++k)
        appendHex(out, static_cast<unsigned char>(s[i + k]));
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::optional<int64_t> parseInteger(std::string_view s, int64_t lo, int64_t hi) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || (s[0] == '-' && lo < 0)))
    return std::nullopt;
  int64_t v = 0;
  auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (err != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
    return std::nullopt;
  return v;
}

std::optional<double> parseDecimal(std::string_view s, double lo, double hi) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.'))
    return std::nullopt;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
          c == 'e' || c == 'E'))
      return std::nullopt; // no "inf", "nan", hex
  double v = 0;
  auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (err != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < lo || v > hi)
    return std::nullopt;
  return v;
}

std::optional<std::vector<int64_t>> parseIntegerList(std::string_view s, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string_view item = s.substr(start, comma == std::string_view::npos ? s.npos : comma - start);
    std::optional<int64_t> v = parseInteger(item, lo, hi);
    if (!v)
      return std::nullopt;
    out.push_back(*v);
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return out;
}

std::string todayUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  char buf[32] = {};
  if (gmtime_r(&t, &tm) && std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm))
    return buf;
  return "";
}

} // namespace weft

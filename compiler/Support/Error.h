// Small helpers shared by the compiler's parsers and reports: one-line
// errors over untrusted text, JSON value previews, byte counts for people.
#ifndef WEFT_COMPILER_SUPPORT_ERROR_H_
#define WEFT_COMPILER_SUPPORT_ERROR_H_

#include "runtime/base/Text.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace weft {

// An error whose message is one line, whatever untrusted text (file
// contents, names, command-line values) it quotes.
inline llvm::Error makeOneLineError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 printableForMessage(msg.str(), 4096));
}

// A JSON value as it appears in the file, cut to `maxChars`, for messages.
inline std::string describeJson(const llvm::json::Value &v, size_t maxChars = 40) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v;
  os.flush();
  if (s.size() > maxChars)
    s = s.substr(0, maxChars - 3) + "...";
  return s;
}

// "16.06 GB": decimal units, as memory and bandwidth are quoted by vendors.
inline std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  return llvm::formatv(u == 0 ? "{0:f0} {1}" : "{0:f2} {1}", bytes, units[u]);
}

} // namespace weft

// `auto lhs = *expr;` or return expr's error.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr)                                       \
  auto lhs##OrErr = (expr);                                                    \
  if (!lhs##OrErr)                                                             \
    return lhs##OrErr.takeError();                                             \
  auto lhs = std::move(*lhs##OrErr)

#endif // WEFT_COMPILER_SUPPORT_ERROR_H_

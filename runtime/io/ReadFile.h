// Reading inputs a user hands over (configs, tokenizers, templates, prompt
// lists, plans, checkpoints) without trusting them: a FIFO or device never
// blocks the open, anything but a regular file is refused, and the size is
// checked before a byte is read. JSON nesting is measured before any parser
// recurses into it.
#ifndef WEFT_RUNTIME_IO_READFILE_H_
#define WEFT_RUNTIME_IO_READFILE_H_

#include "runtime/base/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::io {

// An open regular file: its descriptor (closed with the object) and size.
class RegularFile {
public:
  // Opens `path` read-only and non-blocking; refuses directories, FIFOs,
  // sockets and devices. `what` names the file's role in messages
  // ("config.json", "the tokenizer").
  static StatusOr<RegularFile> open(const std::string &path, const std::string &what);
  RegularFile(RegularFile &&other) noexcept;
  RegularFile &operator=(RegularFile &&other) noexcept;
  RegularFile(const RegularFile &) = delete;
  RegularFile &operator=(const RegularFile &) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  // Reads the whole file into `out` (the size known at open; a file that
  // shrinks meanwhile is an error).
  Status readAll(std::string &out, const std::string &path) const;

private:
  RegularFile() = default;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file of at most `maxBytes`, checked before reading.
StatusOr<std::string> readRegularFile(const std::string &path, uint64_t maxBytes,
                                      const std::string &what);

// Everything on standard input (file descriptor 0), up to `maxBytes`: a
// pipe, a terminal or a file alike, read in pieces, so that an endless
// stream (/dev/zero) ends in an error naming `what` once it passes the cap
// instead of filling memory.
StatusOr<std::string> readStandardInput(uint64_t maxBytes, const std::string &what);

// The deepest nesting of arrays and objects in JSON text, skipping strings;
// one pass, no recursion, whatever the text.
int jsonNestingDepth(std::string_view text);
// An error naming `name` when the nesting is deeper than `maxDepth`.
Status checkJsonNesting(std::string_view text, int maxDepth, const std::string &name);
inline constexpr int kMaxJsonDepth = 64;

} // namespace weft::io

#endif // WEFT_RUNTIME_IO_READFILE_H_

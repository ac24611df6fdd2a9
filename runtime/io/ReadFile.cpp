// Opening, sizing and reading untrusted files, and measuring JSON nesting.
#include "runtime/io/ReadFile.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace weft::io {

namespace {
std::string errnoText(int err) { return std::generic_category().message(err); }

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}
} // namespace

StatusOr<RegularFile> RegularFile::open(const std::string &path, const std::string &what) {
  RegularFile f;
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer forever; on a regular file it changes nothing.
  do {
    f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (f.fd_ < 0 && errno == EINTR);
  if (f.fd_ < 0) {
    int err = errno;
    std::string msg = path + ": cannot open " + what + " (" + errnoText(err) + ")";
    return err == ENOENT || err == ENOTDIR ? notFound(msg) : failedPrecondition(msg);
  }
  struct stat st;
  if (::fstat(f.fd_, &st) != 0)
    return internalError(path + ": cannot stat " + what + " (" + errnoText(errno) + ")");
  if (!S_ISREG(st.st_mode))
    return invalidArgument(path + ": " + what + " is " + kindOf(st.st_mode) +
                           ": expected a regular file");
  f.size_ = uint64_t(st.st_size);
  return f;
}

RegularFile::RegularFile(RegularFile &&other) noexcept : fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

RegularFile &RegularFile::operator=(RegularFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    other.fd_ = -1;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status RegularFile::readAll(std::string &out, const std::string &path) const {
  out.assign(size_, '\0');
  uint64_t done = 0;
  while (done < size_) {
    ssize_t n = ::pread(fd_, out.data() + done, size_ - done, off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return internalError(path + ": read failed at byte " + std::to_string(done) + " (" +
                           errnoText(errno) + ")");
    if (n == 0)
      return outOfRange(path + ": the file ended at byte " + std::to_string(done) +
                        ", before the " + std::to_string(size_) + " bytes it had when opened");
    done += uint64_t(n);
  }
  return Status::ok();
}

StatusOr<std::string> readRegularFile(const std::string &path, uint64_t maxBytes,
                                      const std::string &what) {
  StatusOr<RegularFile> f = RegularFile::open(path, what);
  if (!f.isOk())
    return f.status();
  if (f->size() > maxBytes)
    return invalidArgument(path + ": " + what + " is " + std::to_string(f->size()) +
                           " bytes; at most " + std::to_string(maxBytes) + " are read");
  std::string out;
  WEFT_RETURN_IF_ERROR(f->readAll(out, path));
  return out;
}

StatusOr<std::string> readStandardInput(uint64_t maxBytes, const std::string &what) {
  std::string out;
  char piece[1 << 16];
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, piece, sizeof piece);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return internalError("standard input: " + what + ": " +
                           std::system_category().message(errno));
    }
    if (n == 0)
      return out;
    if (out.size() + uint64_t(n) > maxBytes)
      return invalidArgument("standard input: " + what + " is over " + std::to_string(maxBytes) +
                             " bytes; at most that many are read");
    out.append(piece, size_t(n));
  }
}

int jsonNestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character cannot end the string
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

Status checkJsonNesting(std::string_view text, int maxDepth, const std::string &name) {
  int depth = jsonNestingDepth(text);
  if (depth > maxDepth)
    return invalidArgument(name + ": JSON nested " + std::to_string(depth) +
                           " levels deep; at most " + std::to_string(maxDepth) + " are read");
  return Status::ok();
}

} // namespace weft::io

// mmap-backed file views and f16/bf16/f32 -> f32 decoding for weight loading.
#include "runtime/io/MappedFile.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::io {

namespace {

std::string errnoText(int err) { return std::strerror(err); }

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

uint16_t load16(const unsigned char *p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

uint32_t load32(const unsigned char *p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

} // namespace

StatusOr<MappedFile> MappedFile::open(const std::string &path) {
  Fd fd;
  do {
    // O_NONBLOCK: a FIFO in place of a checkpoint must not block the open.
    fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd.fd < 0 && errno == EINTR);
  if (fd.fd < 0) {
    int err = errno;
    std::string msg = path + ": cannot open: " + errnoText(err);
    return err == ENOENT ? notFound(msg) : invalidArgument(msg);
  }
  struct stat st;
  if (::fstat(fd.fd, &st) != 0)
    return internalError(path + ": cannot stat: " + errnoText(errno));
  if (!S_ISREG(st.st_mode))
    return invalidArgument(path + ": not a regular file");

  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(st.st_size);
  if (file.size_ == 0)
    return file; // mmap rejects length 0; an empty view is the right answer
  void *p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted,
                  path + ": cannot map " + std::to_string(file.size_) +
                      " bytes: " + errnoText(errno));
  file.data_ = p;
  return file;
}

MappedFile::MappedFile(MappedFile &&other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_)
    ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) // inf keeps a zero mantissa; NaN keeps its payload
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp != 0)
    return bitsToFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
  if (mant == 0)
    return bitsToFloat(sign);
  // Subnormal: mant * 2^-24. Renormalize so the leading one becomes the
  // implicit bit of an f32 normal (all f16 subnormals are f32 normals).
  int shift = 0;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    ++shift;
  }
  mant &= 0x3ffu;
  uint32_t fexp = static_cast<uint32_t>(127 - 15 + 1 - shift);
  return bitsToFloat(sign | (fexp << 23) | (mant << 13));
}

float bfloat16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

Status decodeToFloat(DType dtype, const void *src, uint64_t count, float *dst) {
  const auto *p = static_cast<const unsigned char *>(src);
  switch (dtype) {
  case DType::F32:
    for (uint64_t i = 0; i < count; ++i)
      dst[i] = bitsToFloat(load32(p + 4 * i));
    return Status::ok();
  case DType::F16:
    for (uint64_t i = 0; i < count; ++i)
      dst[i] = halfToFloat(load16(p + 2 * i));
    return Status::ok();
  case DType::BF16:
    for (uint64_t i = 0; i < count; ++i)
      dst[i] = bfloat16ToFloat(load16(p + 2 * i));
    return Status::ok();
  default:
    return unimplemented(std::string("cannot decode dtype ") + dtypeName(dtype) +
                         " to f32: expected F32, F16 or BF16");
  }
}

} // namespace weft::io

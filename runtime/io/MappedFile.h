// Read-only memory mapping of a whole file, and decoding of the float dtypes
// checkpoints store (F32, F16, BF16) to f32. No LLVM here: the runtime uses it.
#ifndef WEFT_RUNTIME_IO_MAPPEDFILE_H_
#define WEFT_RUNTIME_IO_MAPPEDFILE_H_

#include "runtime/base/Status.h"
#include "runtime/io/Safetensors.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::io {

// Owns one read-only mapping; the bytes stay valid until the object is
// destroyed or moved from. An empty file maps to an empty view.
class MappedFile {
public:
  static StatusOr<MappedFile> open(const std::string &path);

  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  std::string_view bytes() const {
    return std::string_view(static_cast<const char *>(data_), size_);
  }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  MappedFile() = default;
  void release();

  std::string path_;
  void *data_ = nullptr;
  uint64_t size_ = 0;
};

// Converts `count` little-endian elements of `dtype` at `src` (any alignment)
// to f32. F16 is IEEE binary16 (subnormals, infinities and NaNs included);
// BF16 is the top half of an f32. Other dtypes are unimplemented.
Status decodeToFloat(DType dtype, const void *src, uint64_t count, float *dst);

// Single-element conversions, exact (every f16 and bf16 value is an f32).
float halfToFloat(uint16_t bits);
float bfloat16ToFloat(uint16_t bits);

} // namespace weft::io

#endif // WEFT_RUNTIME_IO_MAPPEDFILE_H_

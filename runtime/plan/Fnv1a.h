// FNV-1a 64: the checksum plans store for checkpoint headers and show for
// kernel binaries. Not cryptographic; it only tells "same bytes" quickly.
#ifndef WEFT_RUNTIME_PLAN_FNV1A_H_
#define WEFT_RUNTIME_PLAN_FNV1A_H_

#include <cstddef>
#include <cstdint>

namespace weft::plan {

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

// Continues a running hash, so large inputs can be hashed in pieces.
inline uint64_t fnv1a64(const void *data, size_t size, uint64_t hash = kFnv1a64Offset) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= kFnv1a64Prime;
  }
  return hash;
}

} // namespace weft::plan

#endif // WEFT_RUNTIME_PLAN_FNV1A_H_

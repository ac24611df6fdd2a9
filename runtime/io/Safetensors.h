// Strict reader for safetensors headers and sharded-checkpoint index files,
// shared by the runtime loader and the compiler's importer (no LLVM here).
#ifndef WEFT_RUNTIME_IO_SAFETENSORS_H_
#define WEFT_RUNTIME_IO_SAFETENSORS_H_

#include "runtime/base/Status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::io {

enum class DType {
  F64, F32, F16, BF16, F8_E4M3, F8_E5M2,
  I64, I32, I16, I8, U8, BOOL,
  U16, U32, U64,
};

// Exact, case-sensitive safetensors spelling ("F16", "BF16", "F8_E4M3", ...).
std::optional<DType> parseDType(std::string_view safetensorsName);
const char *dtypeName(DType dtype);
uint64_t dtypeSize(DType dtype); // bytes per element

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // Byte range [dataBegin, dataEnd) relative to the start of the data section.
  uint64_t dataBegin = 0;
  uint64_t dataEnd = 0;

  // Headers produced by the parser are validated, so these cannot overflow.
  uint64_t numElements() const;
  uint64_t numBytes() const;
};

// Files larger than this are certainly not safetensors headers; the cap keeps
// a corrupt length prefix from making us allocate gigabytes.
inline constexpr uint64_t kMaxSafetensorsHeaderSize = 100ull << 20;

struct SafetensorsHeader {
  std::string path;
  uint64_t headerSize = 0; // bytes of JSON after the 8-byte length prefix
  uint64_t fileSize = 0;
  std::vector<TensorInfo> tensors;             // in header order
  std::map<std::string, std::string> metadata; // "__metadata__"

  // O(log n). The parser builds the index; code that edits `tensors` must
  // call rebuildIndex() afterwards.
  const TensorInfo *find(std::string_view name) const;
  void rebuildIndex();

  uint64_t dataOffset() const { return 8 + headerSize; }
  uint64_t dataSize() const {
    return fileSize > dataOffset() ? fileSize - dataOffset() : 0;
  }

private:
  std::map<std::string, size_t, std::less<>> index_;
};

// Reads only the length prefix and the JSON header (never the tensor data)
// and validates both against the file size.
StatusOr<SafetensorsHeader> readSafetensorsHeader(const std::string &path);

// The same checks on bytes already in memory: `prefix` holds at least the
// first 8 + headerSize bytes of a file of `fileSize` bytes. `displayName`
// starts every error message.
StatusOr<SafetensorsHeader> parseSafetensorsHeader(std::string_view prefix,
                                                   uint64_t fileSize,
                                                   std::string_view displayName);

// model.safetensors.index.json of a sharded checkpoint.
struct ShardIndex {
  std::map<std::string, std::string> weightMap; // tensor name -> shard file
  std::optional<uint64_t> totalSize;            // metadata.total_size
  std::vector<std::string> shardFiles() const;  // distinct, sorted
};

StatusOr<ShardIndex> readShardIndex(const std::string &path);
StatusOr<ShardIndex> parseShardIndex(std::string_view json,
                                     std::string_view displayName);

} // namespace weft::io

#endif // WEFT_RUNTIME_IO_SAFETENSORS_H_

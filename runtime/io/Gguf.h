// Strict reader for GGUF files (llama.cpp's single-file models, versions 2
// and 3): the header, the metadata key-value pairs and the tensor index,
// checked against the file's size before anything is trusted. The tensor
// data is never read here; a tensor's bytes are [offset, offset + bytes) of
// the file. Shared by the compiler's importer and the runtime (no LLVM).
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64
// metadata count; each metadata pair a string key, a u32 value type and
// the value (strings as u64 length + bytes; arrays as u32 element type, u64
// count, elements); each tensor a string name, u32 dimension count, u64
// dimensions (the first varies fastest), u32 ggml type and u64 offset from
// the data section, which starts at the first multiple of
// general.alignment (default 32) after the index.
#ifndef WEFT_RUNTIME_IO_GGUF_H_
#define WEFT_RUNTIME_IO_GGUF_H_

#include "runtime/base/Status.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::io {

// The value types of GGUF metadata, by their numbers in the file.
enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char *ggufValueTypeName(GgufValueType type);

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  // Integers and booleans widen into `u` (unsigned) or `i` (signed), floats
  // into `f`; strings into `s`; an array's element type and elements.
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  GgufValueType elementType = GgufValueType::U8;
  std::vector<GgufValue> array;

  // The value as an unsigned integer, if it is a non-negative integer.
  std::optional<uint64_t> asUnsigned() const;
  std::optional<double> asNumber() const; // any integer or float
};

// ggml's tensor types (the numbers GGUF stores). Only those with a known
// block layout are named; a file may hold others (the importer refuses
// them, naming the tensor).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};
// "Q4_K", or nothing for a number without a known layout.
std::optional<std::string_view> ggmlTypeName(uint32_t type);
// Elements per block and bytes per block (F32: 1 and 4), if known.
struct GgmlBlock {
  uint64_t elements = 0, bytes = 0;
};
std::optional<GgmlBlock> ggmlBlock(uint32_t type);

struct GgufTensor {
  std::string name;
  uint32_t type = 0;           // a GgmlType number
  std::vector<uint64_t> dims;  // ggml order: dims[0] varies fastest
  uint64_t offset = 0;         // in the file (data section start + the stored offset)
  uint64_t bytes = 0;

  uint64_t numElements() const;
};

// What the reader accepts at most: far above any real model's (a 150k-token
// vocabulary is two arrays of 150k strings), far below what a hostile count
// would make it allocate.
inline constexpr uint64_t kMaxGgufTensors = 1u << 20;
inline constexpr uint64_t kMaxGgufMetadata = 1u << 16;
inline constexpr uint64_t kMaxGgufStringBytes = 64u << 20;
inline constexpr int kMaxGgufDims = 4;
inline constexpr int kMaxGgufArrayDepth = 2;

struct GgufFile {
  std::string path;
  uint32_t version = 0;
  uint64_t fileSize = 0;
  uint64_t alignment = 32;
  uint64_t dataOffset = 0; // where the data section starts
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors; // in file order

  const GgufValue *find(std::string_view key) const;
  const GgufTensor *tensor(std::string_view name) const;
};

// Reads the header, metadata and tensor index of the file at `path` (its
// tensor data is left on disk) and checks them: the magic and version,
// counts and lengths within the file, value and array types known, array
// nesting at most kMaxGgufArrayDepth, keys and tensor names unique and
// printable, general.alignment a power of two, dimensions positive and at
// most kMaxGgufDims, element counts without overflow and whole blocks of
// the type (refused for a type of unknown layout), offsets aligned, every
// tensor inside the data section and no two overlapping. Errors name the
// file and what is wrong, in one line.
StatusOr<GgufFile> readGguf(const std::string &path);

// The same on bytes in memory: `prefix` holds the file's first bytes (at
// least the header and index), `fileSize` its whole size; `displayName`
// starts every message.
StatusOr<GgufFile> parseGguf(std::string_view prefix, uint64_t fileSize,
                             std::string_view displayName);

} // namespace weft::io

#endif // WEFT_RUNTIME_IO_GGUF_H_

// libFuzzer target for the safetensors header and shard-index parsers: besides
// crashes and sanitizer reports, it traps when a result breaks the contract.
#include "runtime/io/Safetensors.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

using namespace weft::io;

namespace {

constexpr std::string_view kName = "fuzz/model.safetensors";

// Every failure is one non-empty line starting with the display name.
void checkError(const weft::Status &status) {
  const std::string &m = status.message();
  if (status.isOk() || m.size() <= kName.size() + 2 ||
      m.compare(0, kName.size(), kName) != 0 || m.find('\n') != std::string::npos ||
      m.find('\r') != std::string::npos)
    __builtin_trap();
}

// An accepted header must describe disjoint, correctly sized ranges that lie
// inside the file, with every tensor reachable through find().
void checkHeader(const SafetensorsHeader &h, uint64_t fileSize) {
  if (h.fileSize != fileSize || h.headerSize == 0 || h.dataOffset() > fileSize)
    __builtin_trap();
  const uint64_t dataSize = fileSize - h.dataOffset();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const TensorInfo &t : h.tensors) {
    if (t.name.empty() || h.find(t.name) != &t || t.dataBegin > t.dataEnd ||
        t.dataEnd > dataSize || t.dataEnd - t.dataBegin != t.numBytes())
      __builtin_trap();
    for (int64_t d : t.shape)
      if (d < 0)
        __builtin_trap();
    if (t.dataEnd > t.dataBegin)
      ranges.emplace_back(t.dataBegin, t.dataEnd);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      __builtin_trap();
}

void fuzzHeader(std::string_view bytes, uint64_t fileSize) {
  auto result = parseSafetensorsHeader(bytes, fileSize, kName);
  if (result.isOk())
    checkHeader(*result, fileSize);
  else
    checkError(result.status());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);

  // The input as a whole file.
  fuzzHeader(input, size);

  // The input as the JSON header of a file with a matching length prefix and
  // some data after it, so mutations spend their time inside the JSON.
  if (size > 0) {
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i)
      file[i] = static_cast<char>((uint64_t(size) >> (8 * i)) & 0xFF);
    file.append(input);
    fuzzHeader(file, file.size() + 4096);
  }

  auto index = parseShardIndex(input, kName);
  if (index.isOk()) {
    if (index->weightMap.empty() || index->shardFiles().empty())
      __builtin_trap();
    for (const std::string &f : index->shardFiles())
      if (f.empty() || f == ".." || f.find('/') != std::string::npos)
        __builtin_trap();
  } else {
    checkError(index.status());
  }
  return 0;
}

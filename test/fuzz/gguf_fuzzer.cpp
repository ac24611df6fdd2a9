// libFuzzer target for the GGUF reader: besides crashes and sanitizer
// reports, it traps when a result breaks the reader's contract.
#include "runtime/io/Gguf.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

using namespace weft::io;

namespace {

constexpr std::string_view kName = "fuzz/model.gguf";

// Every failure is one non-empty line starting with the display name.
void checkError(const weft::Status &status) {
  const std::string &m = status.message();
  if (status.isOk() || m.size() <= kName.size() + 2 ||
      m.compare(0, kName.size(), kName) != 0 || m.find('\n') != std::string::npos)
    __builtin_trap();
}

// An accepted file describes whole blocks of known types in disjoint,
// aligned ranges inside the file's data section.
void checkFile(const GgufFile &f, uint64_t size) {
  if (f.dataOffset > size || f.dataOffset % f.alignment)
    __builtin_trap();
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensor &t : f.tensors) {
    std::optional<GgmlBlock> b = ggmlBlock(t.type);
    if (!b || t.dims.empty() || t.dims.size() > size_t(kMaxGgufDims) ||
        t.dims[0] % b->elements || t.numElements() / b->elements * b->bytes != t.bytes ||
        t.offset < f.dataOffset || (t.offset - f.dataOffset) % f.alignment ||
        t.offset > size || t.bytes > size - t.offset || f.tensor(t.name) != &t)
      __builtin_trap();
    ranges.push_back({t.offset, t.offset + t.bytes});
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  weft::StatusOr<GgufFile> f = parseGguf(bytes, size, kName);
  if (f.isOk())
    checkFile(*f, size);
  else
    checkError(f.status());
  return 0;
}

// libFuzzer target for topology descriptions: the JSON file format, and the
// --topology short forms and --memory-cap values (the input split at its
// first newline: spec, then caps). Any bytes must give a topology or a
// one-line error, never a crash, hang or sanitizer report; a topology that
// parses must survive its own JSON round trip.
#include "compiler/Hardware/Topology.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace {
void oneLine(llvm::Error e) {
  std::string msg = llvm::toString(std::move(e));
  if (msg.empty() || msg.find('\n') != std::string::npos)
    abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<weft::hardware::Topology> t = weft::hardware::parseTopologyJson(text, "fuzz.json");
  if (!t) {
    oneLine(t.takeError());
  } else {
    std::string again = weft::hardware::topologyToJson(*t);
    llvm::Expected<weft::hardware::Topology> back =
        weft::hardware::parseTopologyJson(again, "round-trip.json");
    if (!back || *back != *t)
      abort(); // what the writer writes, the reader reads back unchanged
  }
  // Short forms and memory caps, only where no file could be named.
  auto [spec, caps] = text.split('\n');
  if (spec.size() < 256 && !spec.contains('/') && !spec.ends_with(".json")) {
    llvm::Expected<weft::hardware::Topology> s = weft::hardware::parseTopologySpec(spec);
    if (!s) {
      oneLine(s.takeError());
    } else if (llvm::Error e = weft::hardware::applyMemoryCaps(*s, caps)) {
      oneLine(std::move(e));
    }
  }
  return 0;
}

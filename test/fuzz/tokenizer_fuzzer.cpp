// libFuzzer target for the tokenizer. An input starting with a 0 byte is
// text for the Llama-3-style fixture tokenizer: encoding must succeed for
// valid UTF-8 and decoding must give the text back exactly (byte-level BPE
// is lossless). Any other input is a tokenizer.json: loading must fail with
// one line or give a tokenizer that encodes and decodes a fixed text.
#include "runtime/tokenizer/Tokenizer.h"

#include <cstdint>
#include <string>
#include <string_view>

using weft::tokenizer::Tokenizer;

namespace {

void require(bool ok) {
  if (!ok)
    __builtin_trap();
}

const Tokenizer &fixture() {
  static Tokenizer t = [] {
    auto loaded = Tokenizer::fromFile(WEFT_TOKENIZER_FIXTURE);
    require(loaded.isOk());
    return std::move(loaded.value());
  }();
  return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in(reinterpret_cast<const char *>(data), size);
  if (!in.empty() && in[0] == '\0') {
    std::string_view text = in.substr(1);
    auto ids = fixture().encode(text, /*addSpecial=*/false);
    // The encoder refuses invalid UTF-8; what it accepts must come back.
    if (ids.isOk())
      require(fixture().decode(*ids) == text);
    else
      require(ids.status().message().find('\n') == std::string::npos);
    return 0;
  }
  auto t = Tokenizer::fromJson(in, "fuzz.json");
  if (!t.isOk()) {
    require(!t.status().message().empty() &&
            t.status().message().find('\n') == std::string::npos);
    return 0;
  }
  auto ids = t->encode("Hello, world! 12345 caf\xC3\xA9 \xF0\x9F\x9A\x80");
  if (ids.isOk())
    (void)t->decode(*ids);
  return 0;
}

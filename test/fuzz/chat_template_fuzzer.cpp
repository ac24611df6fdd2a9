// libFuzzer target for chat templates: any input is a template, rendered
// with a fixed conversation under small limits. Parsing and rendering must
// end in an output or a one-line error, never a crash, hang or blow-up.
#include "runtime/chat/ChatTemplate.h"

#include <cstdint>
#include <string_view>

namespace {
void require(bool ok) {
  if (!ok)
    __builtin_trap();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view source(reinterpret_cast<const char *>(data), size);
  weft::StatusOr<weft::chat::ChatTemplate> t =
      weft::chat::ChatTemplate::parse(source, "fuzz.jinja");
  if (!t.isOk()) {
    require(t.status().message().find('\n') == std::string::npos);
    return 0;
  }
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
      "messages": [{"role": "system", "content": "Be brief."},
                   {"role": "user", "content": "Hi \u00e9 \ud83d\ude42"},
                   {"role": "assistant", "content": "Hello.\n"},
                   {"role": "user", "content": "2+2?"}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  weft::chat::RenderLimits limits;
  limits.maxSteps = 20000;
  limits.maxOutputBytes = 1 << 16;
  weft::StatusOr<std::string> out = t->render(context, limits);
  if (!out.isOk())
    require(out.status().message().find('\n') == std::string::npos);
  else
    require(out->size() <= (1u << 16) + 4096);
  return 0;
}

// libFuzzer target for chat templates: any input is a template, rendered
// with a fixed conversation under small limits. Parsing and rendering must
// end in an output or a one-line error, never a crash, hang or blow-up.
//
// Each input runs on a thread with a 512 KiB stack, a sixteenth of a
// tool's 8 MiB: unbounded recursion (45,000 `not ` once overflowed the
// tools' stacks) then overflows here with inputs a few kilobytes long, which
// the mutator reaches in seconds, while the parser's and evaluator's own
// bounds (kMaxExprNesting, RenderLimits::maxDepth) fit with room to spare.
#include "runtime/chat/ChatTemplate.h"

#include <pthread.h>

#include <cstdint>
#include <string_view>

namespace {

constexpr size_t kFuzzStackBytes = 512 * 1024;

void require(bool ok) {
  if (!ok)
    __builtin_trap();
}

void parseAndRender(std::string_view source) {
  weft::StatusOr<weft::chat::ChatTemplate> t =
      weft::chat::ChatTemplate::parse(source, "fuzz.jinja");
  if (!t.isOk()) {
    require(t.status().message().find('\n') == std::string::npos);
    return;
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
}

void *runInput(void *arg) {
  parseAndRender(*static_cast<std::string_view *>(arg));
  return nullptr;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view source(reinterpret_cast<const char *>(data), size);
  pthread_attr_t attr;
  require(pthread_attr_init(&attr) == 0);
  require(pthread_attr_setstacksize(&attr, kFuzzStackBytes) == 0);
  pthread_t thread;
  require(pthread_create(&thread, &attr, runInput, &source) == 0);
  require(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attr);
  return 0;
}

// libFuzzer target for the server's request bodies: any input is the body
// of a completion or (first byte odd) chat completion request. Parsing must
// accept it or refuse it with a 4xx error of one line whose JSON is
// OpenAI's error shape, never crash or hang.
#include "runtime/server/OpenAi.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

namespace {
void require(bool ok) {
  if (!ok)
    __builtin_trap();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bool chat = size > 0 && (data[0] & 1);
  std::string_view body(reinterpret_cast<const char *>(data), size);
  weft::server::RequestLimits limits;
  limits.maxContext = 4096;
  weft::server::CompletionRequest r;
  std::optional<weft::server::ApiError> e =
      weft::server::parseCompletionRequest(body, chat, limits, r);
  if (e) {
    require(e->status >= 400 && e->status < 500);
    nlohmann::json j = nlohmann::json::parse(e->json(), nullptr, false);
    require(!j.is_discarded() && j.contains("error") && j["error"]["message"].is_string());
    return 0;
  }
  require(r.maxTokens >= 0 && r.maxTokens <= 4096);
  require(r.sampling.temperature >= 0 && r.sampling.temperature <= 2);
  require(r.sampling.topP > 0 && r.sampling.topP <= 1);
  require(r.stop.size() <= 4);
  require(chat ? !r.messages.empty() : (r.promptIsIds || !r.promptIds.size()));
  return 0;
}

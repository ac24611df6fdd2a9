// The OpenAI HTTP API as data: request bodies parsed and checked into what
// the scheduler needs, and the JSON of answers, stream chunks and errors.
// No sockets here, so every rule is tested without a server.
#ifndef WEFT_RUNTIME_SERVER_OPENAI_H_
#define WEFT_RUNTIME_SERVER_OPENAI_H_

#include "runtime/base/Status.h"
#include "runtime/serve/Scheduler.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::server {

// Limits on what a request may ask for.
struct RequestLimits {
  size_t maxBodyBytes = 4u << 20; // checked by the server before parsing
  int maxJsonDepth = 64;
  int maxStop = 4;                // stop strings (OpenAI allows 4)
  size_t maxStopBytes = 256;
  size_t maxPromptBytes = 1u << 20; // prompt text, or all message contents together
  int maxContext = 0;             // positions a sequence may use (0: no check here)
};

struct ChatMessage {
  std::string role;    // system, user, assistant, tool
  std::string content;
};

// A parsed /v1/completions or /v1/chat/completions body.
struct CompletionRequest {
  bool chat = false;
  std::string model;
  // /v1/completions: a string, or token ids; /v1/chat/completions: messages.
  std::string promptText;
  std::vector<int32_t> promptIds;
  bool promptIsIds = false;
  std::vector<ChatMessage> messages;
  int maxTokens = 16;       // OpenAI's default for completions
  bool maxTokensGiven = false;
  std::string maxTokensParam = "max_tokens"; // the field maxTokens came from
  serve::SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool includeUsage = false; // stream_options.include_usage
  // Log-probabilities: -1 none; else each token's, with this many most
  // likely alternatives (chat: logprobs true + top_logprobs; completions:
  // logprobs N). At most serve::kMaxTopLogprobs.
  int logprobs = -1;
};

// One generated token's log-probability and its most likely alternatives.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
// The text one token adds after the output's tokens before it (`before`:
// up to serve::kTextContext of them), as the whole output decodes: a
// SentencePiece word's leading space, which a token decoded alone loses
// (its bytes; they may be part of a character).
using TokenText = std::function<std::string(const std::vector<int32_t> &before, int32_t token)>;

// The `logprobs` object of a choice for `tokens` in OpenAI's shape: chat
// {"content": [{token, logprob, bytes, top_logprobs}]}; completions
// {tokens, token_logprobs, top_logprobs, text_offset}, offsets counted
// from `textOffset` (the length of the text before these tokens);
// `nextOffset` (completions) receives the offset after them. `before`:
// the output's tokens before these (their last serve::kTextContext spell
// the first ones; alternatives are spelled in the chosen token's place).
nlohmann::json logprobsJson(const CompletionRequest &r, const std::vector<TokenLogprob> &tokens,
                            const TokenText &text, size_t textOffset,
                            size_t *nextOffset = nullptr,
                            const std::vector<int32_t> &before = {});

// An error the client caused, in OpenAI's shape: HTTP status, message,
// type and the parameter at fault.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
  std::string json() const;
};

// Parses and checks a body. Unknown fields are ignored (as OpenAI's
// clients send many); known ones of the wrong type or out of range are an
// error naming the field: temperature in [0, 2], top_p in (0, 1], top_k >= 0
// (or -1: off), max_tokens >= 1, n == 1, stop: a string or up to 4, seed an
// integer, stream a boolean, logprobs as the endpoint defines it.
std::optional<ApiError> parseCompletionRequest(std::string_view body, bool chat,
                                               const RequestLimits &limits,
                                               CompletionRequest &out);

// "cmpl-<hex>" / "chatcmpl-<hex>" from a counter and a per-process salt.
std::string completionId(bool chat, uint64_t serial);

struct Usage {
  int promptTokens = 0, completionTokens = 0;
  int cachedTokens = 0; // of the prompt, from the prefix cache
};

// A whole (non-streamed) answer.
// `logprobs`: the choice's logprobs object, or null.
std::string completionJson(const CompletionRequest &r, const std::string &id, int64_t created,
                           const std::string &model, const std::string &text,
                           const char *finishReason, const Usage &usage,
                           const nlohmann::json &logprobs = nullptr);
// One server-sent event of a stream: "data: {...}\n\n". `text` may be
// empty; `finishReason` null until the last chunk. A chat stream's first
// chunk carries the assistant role.
std::string streamChunk(const CompletionRequest &r, const std::string &id, int64_t created,
                        const std::string &model, const std::string &text,
                        const char *finishReason, bool first,
                        const nlohmann::json &logprobs = nullptr);
// The usage chunk (stream_options.include_usage): no choices.
std::string usageChunk(const CompletionRequest &r, const std::string &id, int64_t created,
                       const std::string &model, const Usage &usage);
inline const char *streamDone() { return "data: [DONE]\n\n"; }
// The OpenAI name of a finish reason ("length", "stop"); null for none.
const char *finishReasonName(serve::Finish f);

} // namespace weft::server

#endif // WEFT_RUNTIME_SERVER_OPENAI_H_

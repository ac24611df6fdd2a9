// OpenAI request parsing and answer formatting (see OpenAi.h).
#include "runtime/server/OpenAi.h"

#include "runtime/base/Text.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

namespace weft::server {

using nlohmann::json;

namespace {

struct TooDeep {};

ApiError bad(std::string message, std::string param = "") {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

const char *typeName(const json &v) { return v.type_name(); }

// A number field as a double: wrong types are errors.
std::optional<ApiError> number(const json &body, const char *name, double &out, bool &given) {
  auto it = body.find(name);
  given = false;
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    return bad(std::string("'") + name + "' must be a number, not " + typeName(*it), name);
  out = it->get<double>();
  if (!std::isfinite(out))
    return bad(std::string("'") + name + "' must be finite", name);
  given = true;
  return std::nullopt;
}

std::optional<ApiError> integer(const json &body, const char *name, int64_t &out, bool &given) {
  auto it = body.find(name);
  given = false;
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (d != std::floor(d) || std::fabs(d) > 9.0e15)
      return bad(std::string("'") + name + "' must be an integer", name);
    out = int64_t(d);
  } else if (it->is_number_integer()) {
    out = it->get<int64_t>();
  } else if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > uint64_t(INT64_MAX))
      return bad(std::string("'") + name + "' is too large", name);
    out = int64_t(u);
  } else {
    return bad(std::string("'") + name + "' must be an integer, not " + typeName(*it), name);
  }
  given = true;
  return std::nullopt;
}

std::optional<ApiError> boolean(const json &body, const char *name, bool &out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_boolean())
    return bad(std::string("'") + name + "' must be a boolean, not " + typeName(*it), name);
  out = it->get<bool>();
  return std::nullopt;
}

// Whether an object's "type" is the string "text" (json::value would throw,
// a 500, on a "type" of another JSON type).
bool isText(const json &v) {
  auto it = v.find("type");
  return it != v.end() && it->is_string() && it->get<std::string>() == "text";
}

// Parameters of the OpenAI API (and vLLM's) that change what a request
// gets and that this server does not implement: refused unless they ask
// for what the server does anyway (their default), never silently dropped.
// Other unknown fields (user, metadata, ...) are ignored.
std::optional<ApiError> unsupported(const json &body) {
  struct Rule {
    const char *name;
    bool (*isDefault)(const json &);
    const char *why;
  };
  auto zero = [](const json &v) { return v.is_number() && v.get<double>() == 0.0; };
  auto one = [](const json &v) { return v.is_number() && v.get<double>() == 1.0; };
  auto empty = [](const json &v) { return (v.is_object() || v.is_array()) && v.empty(); };
  auto isFalse = [](const json &v) { return v.is_boolean() && !v.get<bool>(); };
  auto noText = [](const json &v) { return v.is_string() && v.get<std::string>().empty(); };
  auto textFormat = [](const json &v) {
    return v.is_object() && v.size() == 1 && isText(v);
  };
  auto noTools = [](const json &v) { return v.is_string() && v.get<std::string>() == "none"; };
  static const Rule rules[] = {
      {"presence_penalty", zero, "no penalties are applied (only 0)"},
      {"frequency_penalty", zero, "no penalties are applied (only 0)"},
      {"repetition_penalty", one, "no penalties are applied (only 1)"},
      {"min_p", zero, "sampling takes temperature, top_k and top_p (min_p only 0)"},
      {"logit_bias", empty, "logits are not biased (only {})"},
      {"best_of", one, "one completion per request (only 1)"},
      {"echo", isFalse, "the prompt is not echoed (only false)"},
      {"suffix", noText, "no suffix is inserted (only \"\")"},
      {"response_format", textFormat, "output is not constrained (only {\"type\": \"text\"})"},
      {"tools", empty, "tools are not passed to the chat template nor calls parsed"},
      {"functions", empty, "tools are not passed to the chat template nor calls parsed"},
      {"tool_choice", noTools, "tools are not passed to the chat template (only \"none\")"},
      {"min_tokens", zero, "generation stops at an end token whenever it comes (only 0)"},
  };
  for (const Rule &rule : rules) {
    auto it = body.find(rule.name);
    if (it == body.end() || it->is_null() || rule.isDefault(*it))
      continue;
    return bad(std::string("'") + rule.name + "' is not supported by this server: " + rule.why,
               rule.name);
  }
  return std::nullopt;
}

// Message content: a string, or an array of {"type": "text", "text": ...}.
std::optional<ApiError> content(const json &v, size_t index, std::string &out) {
  std::string param = "messages[" + std::to_string(index) + "].content";
  if (v.is_string()) {
    out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array())
    return bad("'" + param + "' must be a string or an array of text parts", param);
  for (const json &part : v) {
    if (!part.is_object() || !isText(part) || !part.contains("text") ||
        !part["text"].is_string())
      return bad("'" + param + "': only parts of type 'text' are supported", param);
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

} // namespace

std::string ApiError::json() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  // Messages may quote the client's bytes (a JSON parse error does): never
  // let invalid UTF-8 break the answer.
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<ApiError> parseCompletionRequest(std::string_view text, bool chat,
                                               const RequestLimits &limits,
                                               CompletionRequest &r) {
  r = CompletionRequest();
  r.chat = chat;
  json body;
  try {
    int maxDepth = limits.maxJsonDepth;
    body = json::parse(text.begin(), text.end(),
                       [maxDepth](int depth, json::parse_event_t, json &) {
                         if (depth > maxDepth)
                           throw TooDeep{};
                         return true;
                       });
  } catch (const TooDeep &) {
    return bad("the JSON body nests deeper than " + std::to_string(limits.maxJsonDepth) +
               " levels");
  } catch (const json::exception &e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    size_t at = what.find("] ");
    return bad("the body is not valid JSON: " +
               printableForMessage(at == std::string::npos ? what : what.substr(at + 2), 300));
  }
  if (!body.is_object())
    return bad(std::string("the body must be a JSON object, not ") + typeName(body));

  auto model = body.find("model");
  if (model == body.end() || !model->is_string())
    return bad("'model' is required and must be a string", "model");
  r.model = model->get<std::string>();

  if (chat) {
    auto messages = body.find("messages");
    if (messages == body.end() || !messages->is_array() || messages->empty())
      return bad("'messages' is required: a non-empty array", "messages");
    for (size_t i = 0; i < messages->size(); ++i) {
      const json &m = (*messages)[i];
      std::string param = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        return bad("'" + param + "' must be an object with a string 'role'", param);
      ChatMessage msg;
      msg.role = m["role"].get<std::string>();
      if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
          msg.role != "developer")
        return bad("'" + param + ".role' is '" + msg.role +
                       "': expected system, developer, user or assistant",
                   param + ".role");
      if (msg.role == "developer")
        msg.role = "system";
      if (!m.contains("content") || m["content"].is_null())
        return bad("'" + param + ".content' is required", param + ".content");
      if (auto e = content(m["content"], i, msg.content))
        return e;
      r.messages.push_back(std::move(msg));
    }
  } else {
    auto prompt = body.find("prompt");
    if (prompt == body.end() || prompt->is_null())
      return bad("'prompt' is required", "prompt");
    if (prompt->is_string()) {
      r.promptText = prompt->get<std::string>();
    } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
      r.promptText = (*prompt)[0].get<std::string>();
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
      r.promptIsIds = true;
      for (const json &id : *prompt) {
        if (!id.is_number_integer() && !id.is_number_unsigned())
          return bad("'prompt' as token ids must hold integers only", "prompt");
        int64_t v = id.get<int64_t>();
        if (v < 0 || v > INT32_MAX)
          return bad("'prompt' token id " + std::to_string(v) + " is out of range", "prompt");
        r.promptIds.push_back(int32_t(v));
      }
    } else {
      return bad("'prompt' must be a string or an array of token ids (one prompt per "
                 "request)",
                 "prompt");
    }
  }

  size_t promptBytes = r.promptText.size();
  for (const ChatMessage &m : r.messages)
    promptBytes += m.content.size();
  if (promptBytes > limits.maxPromptBytes)
    return bad("the prompt is " + std::to_string(promptBytes) + " bytes; this server takes at "
                   "most " + std::to_string(limits.maxPromptBytes),
               chat ? "messages" : "prompt");

  if (auto e = unsupported(body))
    return e;
  int64_t n = 1;
  bool given = false;
  if (auto e = integer(body, "n", n, given))
    return e;
  if (given && n != 1)
    return bad("'n' must be 1: one completion per request", "n");

  // Both fields are checked; max_completion_tokens (OpenAI's newer name)
  // wins when both are given.
  for (const char *name : {"max_completion_tokens", "max_tokens"}) {
    int64_t v = 0;
    if (auto e = integer(body, name, v, given))
      return e;
    if (!given)
      continue;
    if (v < 1)
      return bad(std::string("'") + name + "' must be at least 1", name);
    if (limits.maxContext > 0 && v > limits.maxContext)
      return bad(std::string("'") + name + "' is " + std::to_string(v) +
                     ", more than the model's context of " + std::to_string(limits.maxContext),
                 name);
    if (r.maxTokensGiven)
      continue;
    r.maxTokens = int(std::min<int64_t>(v, INT32_MAX));
    r.maxTokensGiven = true;
    r.maxTokensParam = name;
  }
  if (!r.maxTokensGiven && chat)
    r.maxTokens = 0; // chat: until the context ends (the server fills it in)

  double d = 0;
  if (auto e = number(body, "temperature", d, given))
    return e;
  if (given) {
    if (d < 0 || d > 2)
      return bad("'temperature' must be between 0 and 2", "temperature");
    r.sampling.temperature = float(d);
  } else {
    r.sampling.temperature = 1.0f; // OpenAI's default
  }
  if (auto e = number(body, "top_p", d, given))
    return e;
  if (given) {
    if (!(d > 0 && d <= 1))
      return bad("'top_p' must be in (0, 1]", "top_p");
    r.sampling.topP = float(d);
  }
  int64_t k = 0;
  if (auto e = integer(body, "top_k", k, given))
    return e;
  if (given) {
    if (k < -1 || k > INT32_MAX)
      return bad("'top_k' must be -1 (off), 0 (off) or a positive integer", "top_k");
    r.sampling.topK = k < 0 ? 0 : int32_t(k);
  }
  int64_t seed = 0;
  if (auto e = integer(body, "seed", seed, given))
    return e;
  if (given)
    r.sampling.seed = uint64_t(seed);
  else
    r.sampling.seed = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);

  auto stop = body.find("stop");
  if (stop != body.end() && !stop->is_null()) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const json &s : *stop) {
        if (!s.is_string())
          return bad("'stop' must be a string or an array of strings", "stop");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or an array of strings", "stop");
    }
    if (int(r.stop.size()) > limits.maxStop)
      return bad("'stop' holds " + std::to_string(r.stop.size()) + " strings; at most " +
                     std::to_string(limits.maxStop),
                 "stop");
    for (const std::string &s : r.stop)
      if (s.empty() || s.size() > limits.maxStopBytes)
        return bad("'stop' strings must be 1 to " + std::to_string(limits.maxStopBytes) +
                       " bytes long",
                   "stop");
  }

  if (auto e = boolean(body, "stream", r.stream))
    return e;
  auto options = body.find("stream_options");
  if (options != body.end() && !options->is_null()) {
    if (!options->is_object())
      return bad("'stream_options' must be an object", "stream_options");
    if (auto e = boolean(*options, "include_usage", r.includeUsage))
      return e;
    if (!r.stream)
      return bad("'stream_options' is only allowed with 'stream': true", "stream_options");
  }

  // Log-probabilities: chat asks with logprobs (a boolean) and
  // top_logprobs (0-20); completions with logprobs (an integer, 0-20).
  int64_t top = 0;
  if (chat) {
    bool wanted = false;
    if (auto e = boolean(body, "logprobs", wanted))
      return e;
    if (auto e = integer(body, "top_logprobs", top, given))
      return e;
    if (given && !wanted)
      return bad("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (given && (top < 0 || top > serve::kMaxTopLogprobs))
      return bad("'top_logprobs' must be 0 to " + std::to_string(serve::kMaxTopLogprobs),
                 "top_logprobs");
    if (wanted)
      r.logprobs = int(top);
  } else {
    if (auto e = integer(body, "logprobs", top, given))
      return e;
    if (given && (top < 0 || top > serve::kMaxTopLogprobs))
      return bad("'logprobs' must be 0 to " + std::to_string(serve::kMaxTopLogprobs), "logprobs");
    if (given)
      r.logprobs = int(top);
  }
  return std::nullopt;
}

json logprobsJson(const CompletionRequest &r, const std::vector<TokenLogprob> &tokens,
                  const TokenText &text, size_t textOffset, size_t *nextOffset,
                  const std::vector<int32_t> &before) {
  std::vector<int32_t> window(
      before.end() - long(std::min(before.size(), serve::kTextContext)), before.end());
  auto advance = [&](int32_t token) {
    window.push_back(token);
    if (window.size() > serve::kTextContext)
      window.erase(window.begin());
  };
  auto bytes = [](const std::string &s) {
    json b = json::array();
    for (unsigned char c : s)
      b.push_back(int(c));
    return b;
  };
  if (r.chat) {
    json content = json::array();
    for (const TokenLogprob &t : tokens) {
      std::string piece = text(window, t.token);
      json top = json::array();
      for (auto [id, lp] : t.top) {
        std::string alt = text(window, id);
        top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes(alt)}});
      }
      content.push_back(
          {{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes(piece)}, {"top_logprobs", top}});
      advance(t.token);
    }
    return {{"content", content}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob &t : tokens) {
    std::string piece = text(window, t.token);
    toks.push_back(piece);
    lps.push_back(t.logprob);
    json top = json::object();
    for (auto [id, lp] : t.top)
      top[text(window, id)] = lp;
    tops.push_back(top);
    offsets.push_back(textOffset);
    textOffset += piece.size();
    advance(t.token);
  }
  if (nextOffset)
    *nextOffset = textOffset;
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

std::string completionId(bool chat, uint64_t serial) {
  static const uint64_t salt = std::random_device{}() ^
                               uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%016llx%08llx", chat ? "chatcmpl" : "cmpl",
                (unsigned long long)(salt * 0x9e3779b97f4a7c15ull + serial),
                (unsigned long long)(serial & 0xffffffffu));
  return buf;
}

const char *finishReasonName(serve::Finish f) {
  switch (f) {
  case serve::Finish::Length: return "length";
  case serve::Finish::Stop: return "stop";
  case serve::Finish::Cancelled: return "abort";
  case serve::Finish::None: return nullptr;
  }
  return nullptr;
}

namespace {
json usageJson(const Usage &u) {
  return {{"prompt_tokens", u.promptTokens},
          {"completion_tokens", u.completionTokens},
          {"total_tokens", u.promptTokens + u.completionTokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cachedTokens}}}};
}
json reason(const char *r) { return r ? json(r) : json(nullptr); }
} // namespace

std::string completionJson(const CompletionRequest &r, const std::string &id, int64_t created,
                           const std::string &model, const std::string &text,
                           const char *finishReason, const Usage &usage, const json &logprobs) {
  json choice = {{"index", 0}, {"finish_reason", reason(finishReason)}, {"logprobs", logprobs}};
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  json out = {{"id", id},
              {"object", r.chat ? "chat.completion" : "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})},
              {"usage", usageJson(usage)}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string streamChunk(const CompletionRequest &r, const std::string &id, int64_t created,
                        const std::string &model, const std::string &text,
                        const char *finishReason, bool first, const json &logprobs) {
  json choice = {{"index", 0}, {"finish_reason", reason(finishReason)}, {"logprobs", logprobs}};
  if (r.chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || (!finishReason && !first))
      delta["content"] = text;
    else if (first)
      delta["content"] = "";
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json out = {{"id", id},
              {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array({choice})}};
  if (r.includeUsage)
    out["usage"] = nullptr;
  return "data: " + out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

std::string usageChunk(const CompletionRequest &r, const std::string &id, int64_t created,
                       const std::string &model, const Usage &usage) {
  json out = {{"id", id},
              {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array()},
              {"usage", usageJson(usage)}};
  return "data: " + out.dump() + "\n\n";
}

} // namespace weft::server

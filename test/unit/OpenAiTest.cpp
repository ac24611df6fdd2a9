// The OpenAI API as data: request bodies (good, malformed, out of range)
// and the exact shape of answers, stream chunks and errors.
#include "runtime/server/OpenAi.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace weft::server {
namespace {

using nlohmann::json;

std::optional<ApiError> parse(const std::string &body, bool chat, CompletionRequest &r) {
  RequestLimits limits;
  limits.maxContext = 4096;
  return parseCompletionRequest(body, chat, limits, r);
}

void expectError(const std::string &body, bool chat, const std::string &what,
                 const std::string &param = "") {
  CompletionRequest r;
  std::optional<ApiError> e = parse(body, chat, r);
  ASSERT_TRUE(e.has_value()) << body;
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find(what), std::string::npos) << e->message;
  EXPECT_EQ(e->param, param) << e->message;
  // The error body is OpenAI's shape.
  json j = json::parse(e->json());
  EXPECT_EQ(j["error"]["message"], e->message);
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"].contains("param") && j["error"].contains("code"));
}

TEST(OpenAiTest, CompletionRequests) {
  CompletionRequest r;
  ASSERT_FALSE(parse(R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0,
                        "top_p": 0.5, "top_k": 40, "seed": 3, "stop": ["\n", "END"],
                        "stream": true, "stream_options": {"include_usage": true},
                        "user": "someone", "presence_penalty": 0})",
                     false, r));
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.promptText, "Hello");
  EXPECT_FALSE(r.promptIsIds);
  EXPECT_EQ(r.maxTokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.topP, 0.5f);
  EXPECT_EQ(r.sampling.topK, 40);
  EXPECT_EQ(r.sampling.seed, 3u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(r.stream && r.includeUsage);

  ASSERT_FALSE(parse(R"({"model": "m", "prompt": [128000, 9906, 1917]})", false, r));
  EXPECT_TRUE(r.promptIsIds);
  EXPECT_EQ(r.promptIds, (std::vector<int32_t>{128000, 9906, 1917}));
  EXPECT_EQ(r.maxTokens, 16);           // OpenAI's default
  EXPECT_EQ(r.sampling.temperature, 1); // likewise
  ASSERT_FALSE(parse(R"({"model": "m", "prompt": ["one"], "max_completion_tokens": 3,
                        "top_k": -1, "stop": "x"})",
                     false, r));
  EXPECT_EQ(r.promptText, "one");
  EXPECT_EQ(r.maxTokens, 3);
  EXPECT_EQ(r.sampling.topK, 0);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
}

TEST(OpenAiTest, ChatRequests) {
  CompletionRequest r;
  ASSERT_FALSE(parse(R"({"model": "m", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": "Hello."},
      {"role": "developer", "content": "x"}]})",
                     true, r));
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[3].role, "system");
  EXPECT_EQ(r.maxTokens, 0) << "chat without max_tokens: up to the context";
}

TEST(OpenAiTest, BadRequestsNameTheField) {
  expectError("{", false, "not valid JSON");
  // A parse error quoting invalid UTF-8 still gives a JSON answer (the
  // request fuzzer found that it threw).
  expectError("{\"model\": \"m\", \"\xff\": 1, ", false, "not valid JSON");
  expectError("[1, 2]", false, "must be a JSON object");
  expectError(std::string(100, '[') + std::string(100, ']'), false, "nests deeper than 64");
  expectError(R"({"prompt": "x"})", false, "'model' is required", "model");
  expectError(R"({"model": "m"})", false, "'prompt' is required", "prompt");
  expectError(R"({"model": "m", "prompt": {"a": 1}})", false, "'prompt' must be", "prompt");
  expectError(R"({"model": "m", "prompt": ["a", "b"]})", false, "one prompt per request", "prompt");
  expectError(R"({"model": "m", "prompt": [1, -2]})", false, "out of range", "prompt");
  expectError(R"({"model": "m", "prompt": [1, 2.5]})", false, "integers only", "prompt");
  expectError(R"({"model": "m", "prompt": "x", "max_tokens": 0})", false, "at least 1", "max_tokens");
  expectError(R"({"model": "m", "prompt": "x", "max_tokens": "5"})", false, "must be an integer", "max_tokens");
  expectError(R"({"model": "m", "prompt": "x", "max_tokens": 5000})", false, "context of 4096", "max_tokens");
  expectError(R"({"model": "m", "prompt": "x", "max_tokens": 1.5})", false, "must be an integer", "max_tokens");
  expectError(R"({"model": "m", "prompt": "x", "temperature": 2.5})", false, "between 0 and 2", "temperature");
  expectError(R"({"model": "m", "prompt": "x", "temperature": "hot"})", false, "must be a number", "temperature");
  expectError(R"({"model": "m", "prompt": "x", "top_p": 0})", false, "(0, 1]", "top_p");
  expectError(R"({"model": "m", "prompt": "x", "top_k": -5})", false, "top_k", "top_k");
  expectError(R"({"model": "m", "prompt": "x", "n": 2})", false, "'n' must be 1", "n");
  expectError(R"({"model": "m", "prompt": "x", "seed": "s"})", false, "must be an integer", "seed");
  expectError(R"({"model": "m", "prompt": "x", "stop": [1]})", false, "array of strings", "stop");
  expectError(R"({"model": "m", "prompt": "x", "stop": ["a","b","c","d","e"]})", false, "at most 4", "stop");
  expectError(R"({"model": "m", "prompt": "x", "stop": [""]})", false, "1 to 256 bytes", "stop");
  expectError(R"({"model": "m", "prompt": "x", "stream": "yes"})", false, "must be a boolean", "stream");
  expectError(R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true}})", false,
              "only allowed with 'stream': true", "stream_options");
  expectError(R"({"model": "m", "prompt": "x", "logprobs": 21})", false, "0 to 20", "logprobs");
  expectError(R"({"model": "m", "prompt": "x", "logprobs": true})", false, "integer", "logprobs");
  expectError("{\"model\": \"m\", \"prompt\": \"" + std::string((1u << 20) + 1, 'x') + "\"}",
              false, "this server takes at most 1048576", "prompt");
  expectError(R"({"model": "m", "messages": []})", true, "non-empty array", "messages");
  expectError(R"({"model": "m", "messages": [{"content": "x"}]})", true, "string 'role'", "messages[0]");
  expectError(R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", true,
              "expected system", "messages[0].role");
  expectError(R"({"model": "m", "messages": [{"role": "user"}]})", true, "is required",
              "messages[0].content");
  expectError(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
              true, "only parts of type 'text'", "messages[0].content");
  // A "type" that is not a string is the same 400, not a 500 (json::value
  // threw on it).
  expectError(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})",
              true, "only parts of type 'text'", "messages[0].content");
  expectError(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": 1})",
              true, "boolean", "logprobs");
  expectError(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
              true, "needs 'logprobs': true", "top_logprobs");
  expectError(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                 "logprobs": true, "top_logprobs": 30})",
              true, "0 to 20", "top_logprobs");
}

// Parameters that would change what a request gets, which the server does
// not implement, are refused by name unless they ask for the default
// (clients send those); unknown fields are ignored.
TEST(OpenAiTest, UnsupportedParametersAreRefusedUnlessDefault) {
  CompletionRequest r;
  EXPECT_FALSE(parse(R"({"model": "m", "prompt": "x", "presence_penalty": 0,
                        "frequency_penalty": 0.0, "repetition_penalty": 1, "min_p": 0,
                        "logit_bias": {}, "best_of": 1, "echo": false, "suffix": "",
                        "response_format": {"type": "text"}, "tools": [], "functions": null,
                        "tool_choice": "none", "min_tokens": 0, "user": "u",
                        "metadata": {"a": "b"}})",
                     false, r));
  const char *refused[][2] = {
      {R"("presence_penalty": 0.5)", "presence_penalty"},
      {R"("frequency_penalty": -1)", "frequency_penalty"},
      {R"("repetition_penalty": 1.1)", "repetition_penalty"},
      {R"("min_p": 0.05)", "min_p"},
      {R"("logit_bias": {"50256": -100})", "logit_bias"},
      {R"("best_of": 3)", "best_of"},
      {R"("echo": true)", "echo"},
      {R"("suffix": "end")", "suffix"},
      {R"("response_format": {"type": "json_object"})", "response_format"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}])", "tools"},
      {R"("tool_choice": "auto")", "tool_choice"},
      {R"("min_tokens": 5)", "min_tokens"},
      {R"("presence_penalty": "high")", "presence_penalty"},
      {R"("response_format": {"type": 1})", "response_format"},
  };
  for (auto &[field, name] : refused)
    expectError(std::string(R"({"model": "m", "prompt": "x", )") + field + "}", false,
                std::string("'") + name + "' is not supported by this server", name);
  expectError(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                 "tools": [{"type": "function"}]})",
              true, "'tools' is not supported", "tools");
}

TEST(OpenAiTest, LogprobsInBothShapes) {
  TokenText text = [](const std::vector<int32_t> &, int32_t t) {
    return std::string(1, char('a' + t));
  };
  std::vector<TokenLogprob> toks = {{0, -0.5f, {{0, -0.5f}, {1, -1.5f}}}, {2, -0.25f, {{2, -0.25f}, {0, -2.0f}}}};
  CompletionRequest chat;
  ASSERT_FALSE(parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "logprobs": true, "top_logprobs": 2})", true, chat));
  EXPECT_EQ(chat.logprobs, 2);
  json c = logprobsJson(chat, toks, text, 0);
  ASSERT_EQ(c["content"].size(), 2u);
  EXPECT_EQ(c["content"][1]["token"], "c");
  EXPECT_FLOAT_EQ(c["content"][1]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(c["content"][1]["bytes"], json::array({99}));
  EXPECT_EQ(c["content"][0]["top_logprobs"][1]["token"], "b");
  EXPECT_FLOAT_EQ(c["content"][0]["top_logprobs"][1]["logprob"].get<float>(), -1.5f);
  CompletionRequest plainChat;
  ASSERT_FALSE(parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "logprobs": false})", true, plainChat));
  EXPECT_EQ(plainChat.logprobs, -1);

  CompletionRequest legacy;
  ASSERT_FALSE(parse(R"({"model": "m", "prompt": "x", "logprobs": 0})", false, legacy));
  EXPECT_EQ(legacy.logprobs, 0);
  json l = logprobsJson(legacy, toks, text, 7);
  EXPECT_EQ(l["tokens"], json::array({"a", "c"}));
  EXPECT_EQ(l["text_offset"], json::array({7, 8}));
  EXPECT_FLOAT_EQ(l["token_logprobs"][0].get<float>(), -0.5f);
  EXPECT_FLOAT_EQ(l["top_logprobs"][1]["a"].get<float>(), -2.0f);
  json whole = json::parse(completionJson(legacy, "cmpl-1", 1, "m", "ac", "length", {1, 2}, l));
  EXPECT_EQ(whole["choices"][0]["logprobs"]["tokens"][1], "c");
}

// A token's text is what it adds after the tokens before it: with a
// SentencePiece-like tokenizer (even tokens start a word, a decode drops
// its first space) the second word keeps its space, the offsets add up to
// the text, and an alternative is spelled in the chosen token's place; a
// stream's later chunk is spelled after the tokens already sent.
TEST(OpenAiTest, LogprobsSpellTokensAfterTheOnesBefore) {
  auto decode = [](const std::vector<int32_t> &ids) {
    std::string s;
    for (int32_t t : ids)
      s += std::string(t % 2 == 0 ? " " : "") + char('a' + t);
    return s.empty() || s[0] != ' ' ? s : s.substr(1);
  };
  TokenText text = [&](const std::vector<int32_t> &before, int32_t t) {
    std::vector<int32_t> with = before;
    with.push_back(t);
    return decode(with).substr(decode(before).size());
  };
  CompletionRequest legacy;
  ASSERT_FALSE(parse(R"({"model": "m", "prompt": "x", "logprobs": 1})", false, legacy));
  std::vector<TokenLogprob> toks = {{0, -0.1f, {{0, -0.1f}}}, {1, -0.2f, {{1, -0.2f}}},
                                    {2, -0.3f, {{4, -0.3f}}}};
  size_t next = 0;
  json l = logprobsJson(legacy, toks, text, 0, &next);
  EXPECT_EQ(l["tokens"], json::array({"a", "b", " c"}));
  EXPECT_EQ(l["text_offset"], json::array({0, 1, 2}));
  EXPECT_EQ(next, decode({0, 1, 2}).size());
  EXPECT_TRUE(l["top_logprobs"][2].contains(" e")) << l["top_logprobs"][2];
  json later = logprobsJson(legacy, {{2, -0.3f, {}}}, text, 2, nullptr, {0, 1});
  EXPECT_EQ(later["tokens"], json::array({" c"}));
}

TEST(OpenAiTest, AnswerAndChunkShapes) {
  CompletionRequest r;
  ASSERT_FALSE(parse(R"({"model": "m", "prompt": "x"})", false, r));
  json a = json::parse(completionJson(r, "cmpl-1", 1700000000, "m", "Hi", "length", {3, 2}));
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["choices"][0]["text"], "Hi");
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a["usage"]["total_tokens"], 5);

  CompletionRequest c;
  ASSERT_FALSE(parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "stream": true, "stream_options": {"include_usage": true}})",
                     true, c));
  std::string first = streamChunk(c, "chatcmpl-1", 1, "m", "", nullptr, true);
  ASSERT_EQ(first.rfind("data: ", 0), 0u);
  ASSERT_EQ(first.substr(first.size() - 2), "\n\n");
  json f = json::parse(first.substr(6));
  EXPECT_EQ(f["object"], "chat.completion.chunk");
  EXPECT_EQ(f["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(f["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(f.contains("usage") && f["usage"].is_null());
  json mid = json::parse(streamChunk(c, "chatcmpl-1", 1, "m", "lo", nullptr, false).substr(6));
  EXPECT_EQ(mid["choices"][0]["delta"]["content"], "lo");
  EXPECT_FALSE(mid["choices"][0]["delta"].contains("role"));
  json last = json::parse(streamChunk(c, "chatcmpl-1", 1, "m", "", "stop", false).substr(6));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  json usage = json::parse(usageChunk(c, "chatcmpl-1", 1, "m", {4, 6}).substr(6));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  EXPECT_EQ(std::string(streamDone()), "data: [DONE]\n\n");
  // Invalid UTF-8 in generated text (a token boundary inside a character)
  // is replaced, never a broken JSON document.
  std::string broken = completionJson(r, "cmpl-2", 1, "m", std::string("a\xe2\x82"), "stop", {});
  EXPECT_TRUE(json::accept(broken));
  EXPECT_NE(completionId(true, 1), completionId(true, 2));
  EXPECT_EQ(completionId(false, 7).rfind("cmpl-", 0), 0u);
}

} // namespace
} // namespace weft::server

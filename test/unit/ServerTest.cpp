// weft-serve's HTTP layer on loopback over a fake engine: every route and
// error in OpenAI's shape, server-sent event streams, stop strings, the
// API key, the bounded queue (429), clients that vanish, 256 concurrent
// streams, and the drain on stop.
#include "runtime/server/Server.h"
#include "test/unit/FakeEngine.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>

namespace weft::server {
namespace {

using nlohmann::json;
using weft::testing::FakeEngine;
using weft::testing::letterTokens;

class ServerTest : public ::testing::Test {
protected:
  void SetUp() override {
    tok = weft::testing::fixtureTokenizer();
    ASSERT_TRUE(tok);
    std::vector<int32_t> letters = letterTokens(*tok);
    ASSERT_GE(letters.size(), 10u);
    engine = std::make_unique<FakeEngine>(tok->vocabSize(), letters, 512, 8192);
  }
  void TearDown() override {
    if (server)
      server->stop();
  }
  void startServer(ServerOptions o = {}, bool withTokenizer = true) {
    o.port = 0;
    o.modelName = "fake";
    o.drainSeconds = o.drainSeconds == 30 ? 2 : o.drainSeconds;
    StatusOr<std::unique_ptr<Server>> s =
        Server::create(*engine, withTokenizer ? tok.get() : nullptr, o);
    ASSERT_TRUE(s.isOk()) << s.status().message();
    server = std::move(s.value());
    ASSERT_TRUE(server->start().isOk());
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(20);
    return c;
  }
  httplib::Result post(const std::string &path, const json &body,
                       const httplib::Headers &headers = {}) {
    return client().Post(path.c_str(), headers, body.dump(), "application/json");
  }
  // The events of one streamed request, and whether [DONE] ended it.
  struct Streamed {
    std::vector<json> events;
    bool done = false; // ended with data: [DONE]
    std::string raw;
  };
  Streamed stream(const json &body, const std::string &path = "/v1/completions") {
    httplib::Client c = client();
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    std::string data;
    req.content_receiver = [&](const char *d, size_t n, uint64_t, uint64_t) {
      data.append(d, n);
      return true;
    };
    httplib::Result r = c.send(req);
    EXPECT_TRUE(r) << "no response";
    if (r)
      EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
    Streamed out;
    out.raw = data;
    size_t at = 0;
    while (at < data.size()) {
      size_t end = data.find("\n\n", at);
      EXPECT_NE(end, std::string::npos) << "an event without its blank line";
      if (end == std::string::npos)
        break;
      std::string ev = data.substr(at, end - at);
      EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
      if (ev == "data: [DONE]")
        out.done = true;
      else
        out.events.push_back(json::parse(ev.substr(6)));
      at = end + 2;
    }
    return out;
  }
  static json body(std::string prompt, int maxTokens, bool stream = false) {
    return {{"model", "fake"}, {"prompt", prompt}, {"max_tokens", maxTokens},
            {"temperature", 0}, {"stream", stream}};
  }

  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<FakeEngine> engine;
  std::unique_ptr<Server> server;
};

TEST_F(ServerTest, ModelsHealthAndMetrics) {
  startServer();
  httplib::Result m = client().Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  json models = json::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "fake");
  EXPECT_EQ(models["data"][0]["object"], "model");
  httplib::Result h = client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  ASSERT_TRUE(post("/v1/completions", body("Hello", 5)));
  httplib::Result metrics = client().Get("/metrics");
  ASSERT_TRUE(metrics);
  for (const char *name :
       {"weft_requests_running ", "weft_requests_waiting ", "weft_kv_cache_usage_ratio ",
        "weft_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1",
        "weft_inter_token_latency_seconds_count 4", "weft_e2e_request_latency_seconds_count 1",
        "weft_generation_tokens_total 5", "weft_requests_finished_total{finish_reason=\"length\"} 1"})
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name << "\n" << metrics->body;
}

// Prefix caching (weft-serve's default): the second request with the same
// long prompt takes its whole blocks from the cache, answers the same, and
// says so in usage and /metrics; with it off, nothing is cached.
TEST_F(ServerTest, PrefixCacheSharesARepeatedPrompt) {
  for (bool caching : {true, false}) {
    ServerOptions o;
    o.scheduler.prefixCaching = caching;
    startServer(o);
    const std::string prompt = "The quick brown fox jumps over the lazy dog, again and again.";
    int promptTokens = int(tok->encode(prompt, true).value().size());
    ASSERT_GT(promptTokens, 9);
    json answers[2];
    for (json &a : answers) {
      httplib::Result r = post("/v1/completions", body(prompt, 6));
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      a = json::parse(r->body);
    }
    EXPECT_EQ(answers[0]["choices"][0]["text"], answers[1]["choices"][0]["text"]);
    EXPECT_EQ(answers[0]["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    // Blocks of 4 tokens: every whole block but the one holding the last
    // prompt token (the step samples after it).
    int expected = caching ? (promptTokens - 1) / 4 * 4 : 0;
    EXPECT_EQ(answers[1]["usage"]["prompt_tokens_details"]["cached_tokens"], expected);
    // A stream's usage chunk says the same.
    json sb = body(prompt, 6, true);
    sb["stream_options"] = {{"include_usage", true}};
    Streamed st = stream(sb);
    ASSERT_TRUE(st.done) << st.raw;
    EXPECT_EQ(st.events.back()["usage"]["prompt_tokens_details"]["cached_tokens"], expected);
    httplib::Result metrics = client().Get("/metrics");
    ASSERT_TRUE(metrics);
    std::string hits = "weft_prefix_cache_hit_tokens_total " + std::to_string(2 * expected);
    EXPECT_NE(metrics->body.find(hits), std::string::npos) << hits << "\n" << metrics->body;
    EXPECT_NE(metrics->body.find("weft_prefix_cache_blocks_in_use 0"), std::string::npos)
        << metrics->body;
    EXPECT_NE(metrics->body.find(caching ? "weft_prefix_cache_queries_total 3"
                                         : "weft_prefix_cache_queries_total 0"),
              std::string::npos)
        << metrics->body;
    server->stop();
    server.reset();
  }
}

TEST_F(ServerTest, CompletionAndItsStreamAgree) {
  startServer();
  httplib::Result r = post("/v1/completions", body("Hello world", 12));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json a = json::parse(r->body);
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["model"], "fake");
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  int promptTokens = int(tok->encode("Hello world", true).value().size());
  EXPECT_EQ(a["usage"]["prompt_tokens"], promptTokens);
  EXPECT_EQ(a["usage"]["completion_tokens"], 12);
  std::string text = a["choices"][0]["text"];
  EXPECT_EQ(text.size(), 12u) << text; // one letter a token

  json s = body("Hello world", 12, true);
  s["stream_options"] = {{"include_usage", true}};
  Streamed st = stream(s);
  ASSERT_TRUE(st.done) << st.raw;
  const std::vector<json> &events = st.events;
  ASSERT_GE(events.size(), 3u);
  std::string streamed;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    EXPECT_TRUE(events[i]["usage"].is_null());
    streamed += events[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 12);
}

TEST(ServerSocketTest, AcceptedConnectionsSendWithoutDelay) {
  // Nagle's algorithm would hold each streamed event behind the client's
  // delayed ACK of the one before: the connections the server accepts
  // must have TCP_NODELAY, inherited from the listening socket.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  setListenSocketOptions(listener);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len), 0);
  int client = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
  int accepted = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  int on = 0;
  socklen_t size = sizeof on;
  ASSERT_EQ(::getsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &on, &size), 0);
  EXPECT_NE(on, 0);
  ASSERT_EQ(::getsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, &size), 0);
  EXPECT_NE(on, 0);
  ::close(accepted);
  ::close(client);
  ::close(listener);
}

TEST_F(ServerTest, LogprobsWithEveryToken) {
  StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::parse(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>", "t.jinja");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  ServerOptions o;
  chat::LoadedChatTemplate loaded;
  loaded.chatTemplate.emplace(std::move(*t));
  o.chat = &loaded;
  startServer(o);
  // The fake's logits are 2 at the token it picks, 1 at the next id, 0
  // elsewhere: log-probabilities follow from the vocabulary size.
  double z = std::log(std::exp(2.0) + std::exp(1.0) + double(tok->vocabSize() - 2));
  json b = body("Hello world", 6);
  b["logprobs"] = 2;
  httplib::Result r = post("/v1/completions", b);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json a = json::parse(r->body);
  json lp = a["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u);
  std::string joined;
  for (size_t i = 0; i < 6; ++i) {
    joined += lp["tokens"][i].get<std::string>();
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), 2.0 - z, 1e-4);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 2u);
    EXPECT_EQ(lp["text_offset"][i], int(i));
  }
  EXPECT_EQ(joined, a["choices"][0]["text"].get<std::string>());

  // Streamed chat: every token's entry arrives once, beside its text.
  json c = {{"model", "fake"},
            {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
            {"max_tokens", 5},
            {"stream", true},
            {"logprobs", true},
            {"top_logprobs", 1}};
  Streamed st = stream(c, "/v1/chat/completions");
  ASSERT_TRUE(st.done) << st.raw;
  std::string content, fromLogprobs;
  size_t entries = 0;
  for (const json &e : st.events) {
    const json &choice = e["choices"][0];
    content += choice["delta"].value("content", "");
    if (choice["logprobs"].is_object())
      for (const json &t : choice["logprobs"]["content"]) {
        ++entries;
        fromLogprobs += t["token"].get<std::string>();
        EXPECT_NEAR(t["logprob"].get<double>(), 2.0 - z, 1e-4);
        EXPECT_EQ(t["top_logprobs"].size(), 1u);
      }
  }
  EXPECT_EQ(entries, 5u);
  EXPECT_EQ(fromLogprobs, content);

  // Streamed completions: text offsets run on across chunks.
  json sb = body("Hello world", 6, true);
  sb["logprobs"] = 1;
  Streamed ss = stream(sb);
  ASSERT_TRUE(ss.done) << ss.raw;
  std::vector<int> offsets;
  for (const json &e : ss.events)
    if (!e["choices"].empty() && e["choices"][0]["logprobs"].is_object())
      for (const json &o : e["choices"][0]["logprobs"]["text_offset"])
        offsets.push_back(o.get<int>());
  EXPECT_EQ(offsets, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST_F(ServerTest, StopStringsCutTheText) {
  startServer();
  httplib::Result r = post("/v1/completions", body("abc", 40));
  ASSERT_TRUE(r && r->status == 200);
  std::string full = json::parse(r->body)["choices"][0]["text"];
  std::string stop = full.substr(10, 2);
  json b = body("abc", 40);
  b["stop"] = {stop};
  r = post("/v1/completions", b);
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  json a = json::parse(r->body);
  EXPECT_EQ(a["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(a["choices"][0]["text"], full.substr(0, full.find(stop)));
  // Streamed, the stop string never leaks out either.
  b["stream"] = true;
  Streamed st = stream(b);
  std::string streamed;
  for (const json &e : st.events)
    if (!e["choices"].empty())
      streamed += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(st.done) << st.raw;
  EXPECT_EQ(streamed, full.substr(0, full.find(stop)));
}

TEST_F(ServerTest, ErrorsInOpenAiShape) {
  ServerOptions o;
  o.apiKey = "sekret";
  o.limits.maxBodyBytes = 4096;
  startServer(o);
  httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
  auto expect = [&](httplib::Result r, int status, const std::string &what) {
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, status) << r->body;
    json e = json::parse(r->body);
    EXPECT_NE(e["error"]["message"].get<std::string>().find(what), std::string::npos) << r->body;
    EXPECT_TRUE(e["error"].contains("type") && e["error"].contains("param") &&
                e["error"].contains("code"));
  };
  expect(post("/v1/completions", body("x", 2)), 401, "missing API key");
  expect(post("/v1/completions", body("x", 2), {{"Authorization", "Bearer no"}}), 401,
         "invalid API key");
  expect(client().Post("/v1/completions", auth, "{nope", "application/json"), 400,
         "not valid JSON");
  json wrong = body("x", 2);
  wrong["model"] = "gpt-4";
  expect(post("/v1/completions", wrong, auth), 400, "model 'gpt-4' is not served here");
  expect(post("/v1/completions", body("x", 0), auth), 400, "at least 1");
  expect(post("/v1/completions", body(std::string(200, 'x'), 200), auth), 400,
         "more than the context of 256");
  // The param names what to change: the prompt when it alone is too long,
  // else the length limit the request used.
  auto param = [&](const json &b, const std::string &path) {
    httplib::Result r = post(path, b, auth);
    return r ? json::parse(r->body)["error"]["param"] : json();
  };
  EXPECT_EQ(param(body(std::string(200, 'x'), 200), "/v1/completions"), "max_tokens");
  EXPECT_EQ(param(body(std::string(300, 'x'), 2), "/v1/completions"), "prompt");
  json both = body(std::string(200, 'x'), 2);
  both["max_completion_tokens"] = 200;
  EXPECT_EQ(param(both, "/v1/completions"), "max_completion_tokens");
  json negative = body("x", 2);
  negative["max_completion_tokens"] = -1;
  expect(post("/v1/completions", negative, auth), 400, "max_completion_tokens");
  json ids = {{"model", "fake"}, {"prompt", {1, 999999}}};
  expect(post("/v1/completions", ids, auth), 400, "outside the vocabulary");
  expect(client().Post("/v1/completions", auth, std::string(5000, ' '), "application/json"), 413,
         "too large");
  expect(client().Get("/v1/nothing", auth), 404, "no route GET /v1/nothing");
  json chat = {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  expect(post("/v1/chat/completions", chat, auth), 400, "this server has no chat template");
  httplib::Result ok = post("/v1/completions", body("x", 2), auth);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, ChatCompletionsThroughTheTemplate) {
  StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}"
      "{% if m.role == 'assistant' and loop.index0 % 2 == 0 %}"
      "{{ raise_exception('roles must alternate') }}{% endif %}"
      "<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}",
      "test.jinja");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  ServerOptions o;
  chat::LoadedChatTemplate loaded;
  loaded.chatTemplate.emplace(std::move(*t));
  loaded.bosToken = "<s>";
  o.chat = &loaded;
  startServer(o);
  json body = {{"model", "fake"},
               {"messages", {{{"role", "user"}, {"content", " Hello "}}}},
               {"max_tokens", 10},
               {"temperature", 0}};
  httplib::Result r = post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json a = json::parse(r->body);
  EXPECT_EQ(a["object"], "chat.completion");
  EXPECT_EQ(a["choices"][0]["message"]["role"], "assistant");
  std::string content = a["choices"][0]["message"]["content"];
  EXPECT_EQ(content.size(), 10u);
  // The prompt is the rendered template, tokenized without extra specials.
  size_t expected = tok->encode("<s><|user|>Hello\n<|assistant|>", false).value().size();
  EXPECT_EQ(a["usage"]["prompt_tokens"], expected);

  // Streamed: the role first, then the same text, then the finish reason.
  body["stream"] = true;
  Streamed st = stream(body, "/v1/chat/completions");
  ASSERT_TRUE(st.done) << st.raw;
  const std::vector<json> &events = st.events;
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string streamed;
  for (const json &e : events)
    if (e["choices"][0]["delta"].contains("content"))
      streamed += e["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");

  // A conversation the template refuses is the client's error.
  json bad = {{"model", "fake"},
              {"messages", {{{"role", "assistant"}, {"content", "I start"}}}}};
  r = post("/v1/chat/completions", bad);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("roles must alternate"), std::string::npos) << r->body;
}

TEST_F(ServerTest, FullQueueAnswers429) {
  ServerOptions o;
  o.maxRequests = 2;
  engine->stepDelay = std::chrono::milliseconds(20);
  startServer(o);
  std::atomic<int> okCount{0};
  std::vector<std::thread> slow;
  for (int i = 0; i < 2; ++i)
    slow.emplace_back([&] {
      httplib::Result r = post("/v1/completions", body("slow", 30));
      okCount += r && r->status == 200;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  httplib::Result r = post("/v1/completions", body("third", 2));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  for (std::thread &t : slow)
    t.join();
  EXPECT_EQ(okCount, 2);
}

TEST_F(ServerTest, VanishedClientsAreCancelledAndFreeTheirPages) {
  engine->stepDelay = std::chrono::milliseconds(5);
  startServer();
  for (int i = 0; i < 4; ++i) {
    httplib::Client c = client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body("go away", 200, true).dump();
    req.set_header("Content-Type", "application/json");
    int chunks = 0;
    req.content_receiver = [&](const char *, size_t, uint64_t, uint64_t) {
      return ++chunks < 3; // hang up after a few chunks
    };
    c.send(req);
  }
  // The server notices at its next write, cancels, and the pages return.
  for (int i = 0; i < 200 && engine->pagesInUse() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(engine->pagesInUse(), 0);
  httplib::Result m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("weft_client_disconnects_total 4"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("weft_requests_finished_total{finish_reason=\"abort\"} 4"),
            std::string::npos);
}

TEST_F(ServerTest, TwoHundredFiftySixStreamsAtOnce) {
  startServer();
  const int n = 256;
  std::atomic<int> complete{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i)
    clients.emplace_back([&, i] {
      Streamed st = stream(body("stream " + std::to_string(i), 8, true));
      std::string text;
      for (const json &e : st.events)
        text += e["choices"][0]["text"].get<std::string>();
      complete += st.done && text.size() == 8;
    });
  for (std::thread &t : clients)
    t.join();
  EXPECT_EQ(complete, n);
  EXPECT_EQ(engine->pagesInUse(), 0);
}

TEST_F(ServerTest, StopDrainsThenCancels) {
  ServerOptions o;
  o.drainSeconds = 0.3;
  engine->stepDelay = std::chrono::milliseconds(10);
  startServer(o);
  std::atomic<int> finished{0};
  std::string reason;
  std::thread longRequest([&] {
    httplib::Result r = post("/v1/completions", body("long", 250));
    if (r && r->status == 200) {
      reason = json::parse(r->body)["choices"][0]["finish_reason"];
      ++finished;
    }
  });
  // Stop once the request runs (a fixed sleep raced the request on a busy
  // machine, under the sanitizers: stop() then came before it arrived).
  for (int i = 0; i < 500 && engine->pagesInUse() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(engine->pagesInUse(), 0) << "the request never started";
  auto t0 = std::chrono::steady_clock::now();
  server->stop();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  longRequest.join();
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(reason, "abort") << "cancelled after the drain";
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(engine->pagesInUse(), 0);
  EXPECT_FALSE(client().Get("/health")); // no longer listening
}

TEST_F(ServerTest, StopStringsNeedATokenizer) {
  startServer({}, /*withTokenizer=*/false);
  json ids = {{"model", "fake"}, {"prompt", {1, 2, 3}}, {"max_tokens", 2}, {"temperature", 0}};
  httplib::Result ok = post("/v1/completions", ids);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  ids["stop"] = "x";
  httplib::Result r = post("/v1/completions", ids);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "stop");
}

// An argmax plan serves temperature 0 (with any top_p / top_k, which
// cannot change the argmax) and names the parameter otherwise.
TEST_F(ServerTest, AnArgmaxPlanNamesTemperature) {
  engine->canSample = false;
  startServer();
  json greedy = body("x", 2);
  greedy["top_p"] = 0.9;
  greedy["top_k"] = 40;
  httplib::Result ok = post("/v1/completions", greedy);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  json sampled = body("x", 2);
  sampled.erase("temperature"); // OpenAI's default is 1
  httplib::Result r = post("/v1/completions", sampled);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "temperature");
}

// A step that fails (a device fault) ends every request with the reason:
// a 500 for a whole answer, an error event then [DONE] for a stream whose
// 200 is already sent; later requests get 503 and /health says so.
TEST_F(ServerTest, AnEngineFailureEndsEveryRequestWithTheReason) {
  engine->stepDelay = std::chrono::milliseconds(10);
  engine->failAtStep = 8;
  startServer();
  int wholeStatus = 0;
  std::string wholeBody;
  Streamed streamed;
  std::thread a([&] {
    httplib::Result r = post("/v1/completions", body("whole", 200));
    if (r) {
      wholeStatus = r->status;
      wholeBody = r->body;
    }
  });
  std::thread b([&] { streamed = stream(body("streamed", 200, true)); });
  a.join();
  b.join();
  EXPECT_EQ(wholeStatus, 500) << wholeBody;
  json e = json::parse(wholeBody, nullptr, false);
  EXPECT_EQ(e["error"]["code"], "engine_failed");
  EXPECT_NE(wholeBody.find("injected device fault"), std::string::npos) << wholeBody;
  EXPECT_TRUE(streamed.done) << streamed.raw;
  ASSERT_FALSE(streamed.events.empty()) << streamed.raw;
  EXPECT_TRUE(streamed.events.back().contains("error")) << streamed.raw;
  EXPECT_EQ(streamed.events.back()["error"]["code"], "engine_failed");
  for (const json &ev : streamed.events)
    if (ev.contains("choices"))
      EXPECT_TRUE(ev["choices"][0]["finish_reason"].is_null()) << "no normal end: " << ev;
  httplib::Result later = post("/v1/completions", body("later", 2));
  ASSERT_TRUE(later);
  EXPECT_EQ(later->status, 503) << later->body;
  httplib::Result health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  auto t0 = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
}

} // namespace
} // namespace weft::server

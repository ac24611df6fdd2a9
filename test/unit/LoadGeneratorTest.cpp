// weft-bench's load generator against weft-serve's HTTP layer on loopback
// (fake engine): closed-loop users and Poisson arrivals are all answered
// and timed, refusals and dead servers are counted as errors with their
// reason, and the statistics and reports are right.
#include "runtime/server/Server.h"
#include "test/unit/FakeEngine.h"
#include "tools/weft-bench/LoadGenerator.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace weft::bench {
namespace {

class LoadGeneratorTest : public ::testing::Test {
protected:
  void SetUp() override {
    tok = weft::testing::fixtureTokenizer();
    ASSERT_TRUE(tok);
    engine = std::make_unique<weft::testing::FakeEngine>(
        tok->vocabSize(), weft::testing::letterTokens(*tok), 256, 16384, /*context 4096*/ 1024);
    engine->stepDelay = std::chrono::milliseconds(1);
    server::ServerOptions o;
    o.port = 0;
    o.modelName = "fake";
    o.scheduler.prefixCaching = true; // as weft-serve runs
    StatusOr<chat::ChatTemplate> t = chat::ChatTemplate::parse(
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>",
        "t.jinja");
    ASSERT_TRUE(t.isOk()) << t.status().message();
    chatTemplate.chatTemplate.emplace(std::move(*t));
    o.chat = &chatTemplate;
    StatusOr<std::unique_ptr<server::Server>> s = server::Server::create(*engine, tok.get(), o);
    ASSERT_TRUE(s.isOk()) << s.status().message();
    srv = std::move(s.value());
    ASSERT_TRUE(srv->start().isOk());
  }
  void TearDown() override { srv->stop(); }
  LoadOptions options() {
    LoadOptions o;
    o.port = srv->port();
    o.model = "fake";
    o.chat = false;
    o.maxTokens = 16;
    o.timeoutSeconds = 30;
    return o;
  }
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<weft::testing::FakeEngine> engine;
  chat::LoadedChatTemplate chatTemplate;
  std::unique_ptr<server::Server> srv;
};

TEST_F(LoadGeneratorTest, ClosedLoopUsersAreAllAnsweredAndTimed) {
  LoadOptions o = options();
  o.users = 20;
  o.requestsPerUser = 3;
  std::vector<RequestResult> results;
  Summary s = runLoad(o, &results);
  EXPECT_EQ(s.requests, 60);
  EXPECT_EQ(s.errors, 0) << (s.firstErrors.empty() ? "" : s.firstErrors[0]);
  ASSERT_EQ(results.size(), 60u);
  for (const RequestResult &r : results) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.outputTokens, 16); // from the usage chunk
    EXPECT_GT(r.ttft, 0);
    EXPECT_LE(r.ttft, r.seconds);
  }
  EXPECT_GT(s.tpsMean, 0);
  EXPECT_LE(s.tpsP10, s.tpsP50);
  EXPECT_LE(s.ttftP50, s.ttftP99);
  EXPECT_GT(s.totalTokensPerSecond, 0);
  EXPECT_NEAR(s.totalTokensPerSecond * s.wallSeconds, 60 * 16, 1e-6);
  // The long-context variant sends longer prompts through the same path.
  o.longContext = true;
  o.users = 2;
  o.requestsPerUser = 1;
  EXPECT_EQ(runLoad(o).errors, 0);
  // Token-id prompts of a fixed length, through /v1/completions.
  o.longContext = false;
  o.chat = false;
  o.promptIds = 32;
  o.promptIdLimit = 200; // the fixture tokenizer's vocabulary is small
  results.clear();
  Summary ids = runLoad(o, &results);
  EXPECT_EQ(ids.errors, 0) << (ids.firstErrors.empty() ? "" : ids.firstErrors[0]);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].outputTokens, 16);
}

// The prefix-caching workloads: a system prompt shared by every request,
// and conversations whose turns resend the conversation so far; the server
// (fake engine, prefix caching on) reports the cached prompt tokens.
TEST_F(LoadGeneratorTest, SharedSystemPromptAndConversations) {
  LoadOptions o = options();
  o.users = 6;
  o.requestsPerUser = 2;
  o.promptIds = 8;
  o.promptIdLimit = tok->vocabSize();
  o.systemPromptTokens = 64;
  std::vector<RequestResult> results;
  Summary s = runLoad(o, &results);
  ASSERT_EQ(s.errors, 0) << (s.firstErrors.empty() ? "" : s.firstErrors[0]);
  EXPECT_EQ(s.promptTokens, 12u * 72u);
  // Blocks of 4: every request admitted after the first shares the 64
  // tokens of the system prompt (requests admitted in the same step as the
  // first share what it computes in that step).
  EXPECT_GE(s.cachedTokens, 11u * 64u);
  EXPECT_LE(s.cachedTokens, s.promptTokens);

  o = options();
  o.chat = true;
  o.users = 4;
  o.turns = 3;
  o.requestsPerUser = 6; // two conversations each
  o.systemPromptTokens = 40;
  s = runLoad(o, &results);
  ASSERT_EQ(s.errors, 0) << s.firstErrors[0];
  ASSERT_EQ(results.size(), 24u);
  int turns[3] = {0, 0, 0};
  std::map<int, std::vector<int>> promptsByTurn;
  for (const RequestResult &r : results) {
    ASSERT_GE(r.turn, 0);
    ASSERT_LT(r.turn, 3);
    ++turns[r.turn];
    promptsByTurn[r.turn].push_back(r.promptTokens);
    EXPECT_FALSE(r.text.empty());
    if (r.turn > 0)
      EXPECT_GT(r.cachedTokens, 40) << "a later turn shares the conversation so far";
  }
  EXPECT_EQ(turns[0], 8);
  EXPECT_EQ(turns[2], 8);
  // Each turn carries the earlier questions and answers.
  EXPECT_GT(*std::min_element(promptsByTurn[2].begin(), promptsByTurn[2].end()),
            *std::max_element(promptsByTurn[0].begin(), promptsByTurn[0].end()));
  EXPECT_GT(s.ttftFirstTurnP50, 0);
  EXPECT_GT(s.ttftLastTurnP50, 0);
}

TEST_F(LoadGeneratorTest, PoissonArrivals) {
  LoadOptions o = options();
  o.rate = 200;
  o.requests = 30;
  Summary s = runLoad(o);
  EXPECT_EQ(s.requests, 30);
  EXPECT_EQ(s.errors, 0);
}

TEST_F(LoadGeneratorTest, RefusalsAndDeadServersAreErrorsWithTheirReason) {
  LoadOptions o = options();
  o.maxTokens = 100000; // beyond the context: every request is refused
  o.users = 2;
  o.requestsPerUser = 2;
  Summary s = runLoad(o);
  EXPECT_EQ(s.errors, 4);
  ASSERT_FALSE(s.firstErrors.empty());
  EXPECT_NE(s.firstErrors[0].find("HTTP 400"), std::string::npos) << s.firstErrors[0];
  o = options();
  o.model = "other";
  Summary wrong = runLoad(o);
  EXPECT_EQ(wrong.errors, wrong.requests);
  o = options();
  o.port = 1; // nothing listens there
  o.users = 1;
  o.requestsPerUser = 1;
  Summary dead = runLoad(o);
  EXPECT_EQ(dead.errors, 1);
  EXPECT_NE(dead.firstErrors[0].find("no answer"), std::string::npos) << dead.firstErrors[0];
}

TEST(LoadGeneratorStatsTest, PercentilesAndReports) {
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(percentile(v, 0), 1);
  EXPECT_EQ(percentile(v, 0.5), 3);
  EXPECT_EQ(percentile(v, 1), 5);
  EXPECT_EQ(percentile({}, 0.5), 0);
  EXPECT_EQ(shortPrompts().size(), 14u);
  Summary a, b;
  a.users = 1, a.requests = 10, a.tpsMean = 200, a.ttftP99 = 0.05;
  b.users = 100, b.requests = 1000, b.tpsMean = 150, b.ttftP99 = 0.2;
  LoadOptions o;
  o.model = "m";
  nlohmann::json j = nlohmann::json::parse(summariesJson({a, b}, o));
  EXPECT_EQ(j["levels"].size(), 2u);
  EXPECT_EQ(j["levels"][1]["users"], 100);
  EXPECT_EQ(j["levels"][1]["tokens_per_second_per_request"]["mean"], 150);
  std::string svg = summariesSvg({a, b}, "t");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '<') - std::count(svg.begin(), svg.end(), '>'),
            0);
}

} // namespace
} // namespace weft::bench

// Chat templates: what a template may not do ends in one line naming the
// template and the line (bad syntax, unsupported statements, runaway loops
// and output, raise_exception), and a few rendering rules that the jinja2
// comparison (test/chat) does not reach.
#include "runtime/chat/ChatTemplate.h"
#include "runtime/chat/ChatTemplateSource.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

#include <cstdio>
#include <fstream>

namespace weft::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string render(const std::string &source, const Json &context = Json::object()) {
  StatusOr<ChatTemplate> t = ChatTemplate::parse(source, "t.jinja");
  if (!t.isOk())
    return "PARSE: " + t.status().message();
  StatusOr<std::string> out = t->render(context);
  return out.isOk() ? *out : "RENDER: " + out.status().message();
}

void expectError(const std::string &source, const std::string &what,
                 const Json &context = Json::object(), RenderLimits limits = {}) {
  StatusOr<ChatTemplate> t = ChatTemplate::parse(source, "t.jinja");
  std::string message;
  if (!t.isOk()) {
    message = t.status().message();
  } else {
    StatusOr<std::string> out = t->render(context, limits);
    ASSERT_FALSE(out.isOk()) << source << " rendered " << *out;
    message = out.status().message();
  }
  EXPECT_NE(message.find(what), std::string::npos) << "[" << what << "] " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ChatTemplateTest, Renders) {
  Json ctx = {{"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})},
              {"add_generation_prompt", true}};
  EXPECT_EQ(render("{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
                   "{% if add_generation_prompt %}<assistant>{% endif %}",
                   ctx),
            "<user>hi<assistant>");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true ~ 2.5 }}"), "a1NoneTrue2.5");
  EXPECT_EQ(render("{{ 'ħé' | length }} {{ 'ħé'[1] }} {{ 'ħé' | reverse }}"), "2 é éħ");
  EXPECT_EQ(render("{{ x.y }}|{{ x is defined }}"), "|False");
  EXPECT_EQ(render("a\n"), "a"); // one trailing newline goes, as in Jinja
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

// Floats print as Python's repr: the shortest digits that read back, fixed
// from 1e-4 up to 1e16, an exponent of at least two digits outside (the
// fuzzer's 4.1e18 once recursed without end here).
TEST(ChatTemplateTest, FloatsPrintAsPythonRepr) {
  const std::pair<double, const char *> cases[] = {
      {4099276460824344804.7, "4.0992764608243446e+18"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {1.5e10, "15000000000.0"},
      {1e-5, "1e-05"},
      {0.0001, "0.0001"},
      {0.1, "0.1"},
      {123.456, "123.456"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {1e100, "1e+100"},
      {-1.25e-7, "-1.25e-07"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {0.30000000000000004, "0.30000000000000004"},
  };
  for (const auto &[value, repr] : cases)
    EXPECT_EQ(render("{{ x }}", Json{{"x", value}}), repr) << value;
  EXPECT_EQ(render("{{ 4099276460824344804.7 }} {{ 0.00001 }} {{ 1000000000000000.0 }}"),
            "4.0992764608243446e+18 1e-05 1000000000000000.0");
}

// Integers have 64 bits here, not Python's unbounded ones: a result past
// them is a render error naming the line, never a wrapped value (the fuzzer
// found 715 * 43297300000000715 overflowing); what fits is exact.
TEST(ChatTemplateTest, IntegerOverflowIsAnError) {
  expectError("{{ 715 * 43297300000000715 }}", "line 1: integer overflow in '*'");
  expectError("{{ 9223372036854775807 + 1 }}", "integer overflow in '+'");
  expectError("\n{{ -9223372036854775807 - 2 }}", "line 2: integer overflow in '-'");
  expectError("{{ x // -1 }}", "integer overflow in '//'",
              Json{{"x", std::numeric_limits<int64_t>::min()}});
  expectError("{{ -x }}", "integer overflow in '-'",
              Json{{"x", std::numeric_limits<int64_t>::min()}});
  expectError("{{ 18446744073709551615 + 0 }}",
              "line 1: the integer 18446744073709551615 does not fit 64 bits");
  expectError("{{ x + 0 }}", "the integer 18446744073709551615 does not fit 64 bits",
              Json{{"x", std::numeric_limits<uint64_t>::max()}});
  expectError("{{ x | int }}", "int of 1e+300 does not fit 64 bits", Json{{"x", 1e300}});
  expectError("{{ range(3) | tojson(indent=100000) }}", "tojson indent 100000 is over 1000");
  expectError("{{ range(1000000) | tojson(indent=1000) }}", "tojson's text grows beyond");
  EXPECT_EQ(render("{{ 9223372036854775806 + 1 }} {{ x % -1 }} {{ x is divisibleby(-1) }}",
                   Json{{"x", std::numeric_limits<int64_t>::min()}}),
            "9223372036854775807 0 True");
  EXPECT_EQ(render("{{ range(0, 9223372036854775807, 4611686018427387904) | list }}"),
            "[0, 4611686018427387904]");
  EXPECT_EQ(render("{{ 'abc'[1:9223372036854775807:9223372036854775807] }}"), "b");
}

// A value doubled in a loop stops with an error (a string at the output
// limit, a list at 2^20 elements), where it used to grow until the process
// ran out of memory.
TEST(ChatTemplateTest, ValuesCannotOutgrowTheOutputLimit) {
  RenderLimits limits;
  limits.maxOutputBytes = 4096;
  expectError("{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
              "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
              "line 1: a string grows beyond the output limit of 4096 bytes", Json::object(),
              limits);
  expectError("{% set ns = namespace(l=[1]) %}\n{% for i in range(40) %}"
              "{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
              "line 2: a list grows beyond 1048576 elements");
  expectError("{% set ns = namespace(s='ab') %}{% for i in range(10) %}"
              "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{% set ns.l = [ns.s] %}"
              "{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
              "line 1: a list's strings grow beyond 16384 bytes", Json::object(), limits);
  expectError("{% set ns = namespace(s='ab') %}{% for i in range(10) %}"
              "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s.replace('a', ns.s) | length }}",
              "replace()'s result grows beyond the output limit of 4096 bytes", Json::object(),
              limits);
  EXPECT_EQ(render("{% set ns = namespace(s='ab') %}{% for i in range(10) %}"
                   "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"),
            "2048");
}

TEST(ChatTemplateTest, BadTemplatesNameTheLine) {
  expectError("{{ 1 + }}", "t.jinja: line 1: expected a value");
  expectError("a\nb\n{% if x %}", "t.jinja: line 3: missing 'endif'");
  expectError("{% for %}{% endfor %}", "expected 'for name");
  expectError("\n\n{{ 'open }}", "t.jinja: line 3");
  expectError("{% macro m() %}{% endmacro %}", "'macro' is not supported in chat templates");
  expectError("{% set a, b = 1, 2 %}", "tuple assignment");
  expectError("{{ x", "unclosed tag");
  expectError("{{ nosuch(1) }}", "unknown function 'nosuch'");
  expectError("{{ 1 | nosuch }}", "unknown filter 'nosuch'");
  expectError("{{ 1 is nosuch }}", "unknown test 'nosuch'");
  expectError("{{ 1 // 0 }}", "division by zero");
  expectError("{{ raise_exception('roles must alternate') }}", "roles must alternate");
  expectError("{% set x = 1 %}{% set x.y = 2 %}", "only namespace() objects take attributes");
}

// Templates come from checkpoints downloaded from anywhere: no nesting,
// however deep, may reach the end of the stack (45,000 `not ` once crashed
// every tool that reads a tokenizer_config.json), and left-growing chains
// (`a + a + ...`, `x.a.a...`, `x|f|f...`) that the parser builds without
// recursing are bounded too, or evaluating and freeing them would recurse.
TEST(ChatTemplateTest, DeepExpressionsEndInOneLineNotACrash) {
  auto repeat = [](const std::string &s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += s;
    return out;
  };
  expectError("{{ " + repeat("not ", 45000) + "x }}", "expression nested too deeply");
  expectError("{{ " + repeat("- ", 100000) + "1 }}", "expression nested too deeply");
  expectError("{{ " + repeat("+", 100000) + "1 }}", "expression nested too deeply");
  expectError("{{ 1" + repeat(" + 1", 100000) + " }}", "expression nested too deeply");
  expectError("{{ 'a'" + repeat(" ~ 'a'", 100000) + " }}", "expression nested too deeply");
  expectError("{{ x" + repeat(".a", 100000) + " }}", "expression nested too deeply");
  expectError("{{ x" + repeat("[0]", 100000) + " }}", "expression nested too deeply");
  expectError("{{ x" + repeat("|e", 100000) + " }}", "expression nested too deeply");
  expectError("{{ x" + repeat(" is sameas x", 50000) + " }}", "expression nested too deeply");
  expectError("{{ x" + repeat(" and x", 100000) + " }}", "expression nested too deeply");
  expectError("{{ x" + repeat(" == x", 100000) + " }}", "expression nested too deeply");
  expectError("{{ 1" + repeat(" if x else 1", 50000) + " }}", "expression nested too deeply");
  expectError("{% set y = " + repeat("not ", 45000) + "x %}", "expression nested too deeply");
  expectError("{% for i in " + repeat("- ", 45000) + "x %}{% endfor %}",
              "expression nested too deeply");
  expectError("{% if " + repeat("not ", 45000) + "x %}{% endif %}", "expression nested too deeply");
  expectError(repeat("{% if x %}", 20000) + repeat("{% endif %}", 20000), "nested too deeply");
  // Just inside the bounds still renders.
  EXPECT_EQ(render("{{ " + repeat("not ", 60) + "x }}", Json{{"x", true}}), "True");
  EXPECT_EQ(render("{{ 1" + repeat(" + 1", 60) + " }}"), "61");
}

// Lexing is linear in the template: tens of thousands of tags on one line,
// or on as many lines, take milliseconds (line numbers and lstrip_blocks
// once rescanned the source from its start for every tag).
TEST(ChatTemplateTest, ManyTagsLexInLinearTime) {
  std::string oneLine, manyLines;
  // Each under the 1 MiB a template may have.
  for (int i = 0; i < 40000; ++i) {
    oneLine += "{% if x %}a{% endif %}";
    manyLines += "  {% if x %}\na{% endif %}\n";
  }
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(render(oneLine, Json{{"x", false}}), "");
  EXPECT_EQ(render(manyLines, Json{{"x", false}}).size(), 0u);
  expectError(manyLines + "{{ nosuch(1) }}", "line 80001: unknown function 'nosuch'");
  // Milliseconds when linear, minutes when quadratic; the bound leaves room
  // for sanitizer builds and a loaded machine.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

// The default step limit ends runaway templates in well under a second:
// steps pay for loop iterations and for the copies values make, so nested
// loops over range(), and lists or strings grown in a loop (quadratic
// copying), end in the one-line error instead of running for minutes.
TEST(ChatTemplateTest, RunawayTemplatesStopWithinASecond) {
  const char *runaway[] = {
      "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}",
      "{% for i in range(1000000) %}{% for j in range(1000000) %}{{ '' }}{% endfor %}{% endfor %}",
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}"
      "{% endfor %}{{ ns.l | length }}",
      "{% set ns = namespace(s='') %}{% for i in range(1000000) %}"
      "{% set ns.s = ns.s ~ 'xxxxxxxxxxxxxxxx' %}{% endfor %}{{ ns.s | length }}",
  };
  for (const char *source : runaway) {
    auto start = std::chrono::steady_clock::now();
    expectError(source, "takes too long");
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // About 0.1-0.9 s here; the bound leaves room for sanitizer builds.
    EXPECT_LT(seconds, 10.0) << source;
  }
  // A 20,000-message conversation is far inside the limit.
  Json messages = Json::array();
  for (int i = 0; i < 20000; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "message " + std::to_string(i)}});
  std::string out = render("{% for m in messages %}<{{ m.role }}>{{ m['content'] }}"
                           "{% if loop.last %}.{% endif %}{% endfor %}",
                           Json{{"messages", messages}});
  const std::string last = "<assistant>message 19999.";
  ASSERT_GE(out.size(), last.size()) << out;
  EXPECT_EQ(out.substr(out.size() - last.size()), last) << out.substr(0, 80);
}

TEST(ChatTemplateTest, LimitsStopRunawayTemplates) {
  expectError("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}", "nested too deeply");
  RenderLimits small;
  small.maxSteps = 10000;
  expectError("{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}",
              "takes too long", Json::object(), small);
  RenderLimits tiny;
  tiny.maxOutputBytes = 1000;
  expectError("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", "output grows beyond 1000",
              Json::object(), tiny);
  expectError("{{ range(10000000) }}", "range() too large");
  StatusOr<ChatTemplate> t = ChatTemplate::parse("x", "t.jinja");
  ASSERT_TRUE(t.isOk());
  EXPECT_FALSE(t->render(Json::array()).isOk());
}

} // namespace
} // namespace weft::chat

namespace {

std::string writeTemp(const std::string &name, const std::string &text) {
  std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

const char *kTurns = "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                     "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

} // namespace

// weft-serve and weft-run --chat read templates the same way: a file wins
// over the plan's, a tokenizer_config.json brings its bos/eos tokens.
TEST(ChatTemplateSource, FileWinsOverThePlanAndBringsItsTokens) {
  using namespace weft::chat;
  std::string config = writeTemp(
      "weft_tokenizer_config.json",
      std::string(R"({"chat_template": ")") + kTurns +
          R"(", "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  weft::StatusOr<LoadedChatTemplate> fromFile =
      loadChatTemplate(config, "plan template", "plan.weft (chat_template)", "<p>", "</p>");
  ASSERT_TRUE(fromFile.isOk()) << fromFile.status().message();
  EXPECT_EQ(fromFile->bosToken, "<s>");
  EXPECT_EQ(fromFile->eosToken, "</s>");
  weft::StatusOr<std::string> text =
      renderConversation(*fromFile, {{"system", "be brief"}, {"user", "Hi"}});
  ASSERT_TRUE(text.isOk()) << text.status().message();
  EXPECT_EQ(*text, "<s>[system]be brief[user]Hi[assistant]");

  weft::StatusOr<LoadedChatTemplate> fromPlan =
      loadChatTemplate("", kTurns, "plan.weft (chat_template)", "<p>", "</p>");
  ASSERT_TRUE(fromPlan.isOk());
  EXPECT_EQ(*renderConversation(*fromPlan, {{"user", "Hi"}}), "<p>[user]Hi[assistant]");

  weft::StatusOr<LoadedChatTemplate> none = loadChatTemplate("", "", "", "", "");
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->chatTemplate.has_value());
  EXPECT_FALSE(renderConversation(*none, {{"user", "Hi"}}).isOk());

  std::string noTemplate = writeTemp("weft_no_template.json", R"({"bos_token": "<s>"})");
  weft::StatusOr<LoadedChatTemplate> bad = loadChatTemplate(noTemplate, "", "", "", "");
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("weft_no_template.json: no chat_template string in it"),
            std::string::npos);
  std::string broken = writeTemp("weft_broken.jinja", "{% for m in messages %}");
  weft::StatusOr<LoadedChatTemplate> unparsed = loadChatTemplate(broken, kTurns, "", "", "");
  ASSERT_FALSE(unparsed.isOk());
  EXPECT_NE(unparsed.status().message().find("weft_broken.jinja"), std::string::npos);
  for (const std::string &p : {config, noTemplate, broken})
    std::remove(p.c_str());
}

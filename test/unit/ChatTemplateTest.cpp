// Chat templates: what a template may not do ends in one line naming the
// template and the line (bad syntax, unsupported statements, runaway loops
// and output, raise_exception), and a few rendering rules that the jinja2
// comparison (test/chat) does not reach.
#include "runtime/chat/ChatTemplate.h"

#include <gtest/gtest.h>

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

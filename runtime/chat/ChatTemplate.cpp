// Chat templates: the public face of the parser and the evaluator.
#include "runtime/chat/ChatTemplate.h"

#include "runtime/base/Text.h"
#include "runtime/chat/TemplateEvaluator.h"
#include "runtime/chat/TemplateParser.h"

namespace weft::chat {

using detail::RenderError;

ChatTemplate::ChatTemplate() = default;
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate &&) noexcept = default;
ChatTemplate &ChatTemplate::operator=(ChatTemplate &&) noexcept = default;

StatusOr<ChatTemplate> ChatTemplate::parse(std::string_view source, const std::string &name) {
  if (source.size() > (1u << 20))
    return invalidArgument(name + ": the template is larger than 1 MiB");
  try {
    ChatTemplate t;
    t.name_ = name;
    t.root_ = detail::parseTemplate(source, name);
    return t;
  } catch (const RenderError &e) {
    return invalidArgument(printableForMessage(e.message, 400));
  } catch (const std::exception &e) {
    return invalidArgument(name + ": " + e.what());
  }
}

StatusOr<std::string> ChatTemplate::render(const nlohmann::ordered_json &context,
                                           const RenderLimits &limits) const {
  if (!context.is_object())
    return invalidArgument(name_ + ": the context must be an object");
  try {
    return detail::renderTemplate(root_, context, limits, name_);
  } catch (const RenderError &e) {
    // raise_exception's message comes from the template and the messages:
    // one printable line, as every error.
    return invalidArgument(printableForMessage(e.message, 400));
  } catch (const nlohmann::ordered_json::exception &e) {
    return invalidArgument(name_ + ": " + e.what());
  }
}

} // namespace weft::chat

// Chat templates: the subset of Jinja that Hugging Face chat templates
// (tokenizer_config.json's "chat_template") use, rendered as transformers'
// apply_chat_template does (trim_blocks, lstrip_blocks, loop controls,
// raise_exception, tojson, strftime_now), so a server builds the same
// prompt text as the model was trained with.
#ifndef WEFT_RUNTIME_CHAT_CHATTEMPLATE_H_
#define WEFT_RUNTIME_CHAT_CHATTEMPLATE_H_

#include "runtime/base/Status.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace weft::chat {

namespace detail {
struct Node;
}

struct RenderLimits {
  size_t maxOutputBytes = 16u << 20;
  int maxDepth = 64;             // nesting of expressions and blocks
  // Expressions evaluated, loop iterations (24 each) and the copies values
  // cost (a list element or 32 bytes of a string, 1 each): about 40 ns a
  // step, so the limit ends a runaway template within a second.
  uint64_t maxSteps = 16000000;
};

class ChatTemplate {
public:
  // Parses `source`; an error names `name`, the line and what is wrong.
  static StatusOr<ChatTemplate> parse(std::string_view source, const std::string &name);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate &&) noexcept;
  ChatTemplate &operator=(ChatTemplate &&) noexcept;

  // Renders with `context` (an object: messages, add_generation_prompt,
  // bos_token, eos_token, tools, ...). raise_exception(msg) in the template
  // becomes an error carrying msg.
  StatusOr<std::string> render(const nlohmann::ordered_json &context,
                               const RenderLimits &limits = {}) const;

private:
  ChatTemplate();
  std::shared_ptr<detail::Node> root_; // immutable once parsed
  std::string name_;
};

} // namespace weft::chat

#endif // WEFT_RUNTIME_CHAT_CHATTEMPLATE_H_

// Where a tool's chat template comes from: a file the user names (a .jinja
// template, or a tokenizer_config.json with "chat_template" and its
// bos/eos tokens), else the one a plan carries. Shared by weft-serve and
// weft-run --chat, so both read templates the same way.
#ifndef WEFT_RUNTIME_CHAT_CHATTEMPLATESOURCE_H_
#define WEFT_RUNTIME_CHAT_CHATTEMPLATESOURCE_H_

#include "runtime/chat/ChatTemplate.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::chat {

struct LoadedChatTemplate {
  std::optional<ChatTemplate> chatTemplate; // none: neither source has one
  std::string bosToken, eosToken;            // the template's bos_token, eos_token
};

// `path` (may be empty) wins over the plan's template (`planSource`, named
// `planWhere` in errors, with its bos/eos strings). Errors name the file.
StatusOr<LoadedChatTemplate> loadChatTemplate(const std::string &path,
                                              const std::string &planSource,
                                              const std::string &planWhere,
                                              const std::string &planBos,
                                              const std::string &planEos);

// The context a chat template renders: the messages ({role, content}
// pairs), add_generation_prompt, bos_token and eos_token, as transformers'
// apply_chat_template passes them.
struct ChatTurn {
  std::string role, content;
};
StatusOr<std::string> renderConversation(const LoadedChatTemplate &t,
                                         const std::vector<ChatTurn> &messages);

} // namespace weft::chat

#endif // WEFT_RUNTIME_CHAT_CHATTEMPLATESOURCE_H_

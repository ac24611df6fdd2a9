// Chat templates from a file or a plan (see ChatTemplateSource.h).
#include "runtime/chat/ChatTemplateSource.h"

#include "runtime/io/ReadFile.h"

#include <nlohmann/json.hpp>

namespace weft::chat {

StatusOr<LoadedChatTemplate> loadChatTemplate(const std::string &path,
                                              const std::string &planSource,
                                              const std::string &planWhere,
                                              const std::string &planBos,
                                              const std::string &planEos) {
  LoadedChatTemplate out;
  std::string source, where;
  if (!path.empty()) {
    StatusOr<std::string> text = io::readRegularFile(path, 16u << 20, "the chat template");
    if (!text.isOk())
      return text.status();
    source = std::move(text.value());
    where = path;
    if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
      WEFT_RETURN_IF_ERROR(io::checkJsonNesting(source, io::kMaxJsonDepth, path));
      nlohmann::json config = nlohmann::json::parse(source, nullptr, false);
      if (config.is_discarded() || !config.is_object() || !config.contains("chat_template") ||
          !config["chat_template"].is_string())
        return invalidArgument(path + ": no chat_template string in it");
      source = config["chat_template"].get<std::string>();
      auto token = [&](const char *key) -> std::string {
        if (!config.contains(key))
          return "";
        const nlohmann::json &t = config[key];
        if (t.is_string())
          return t.get<std::string>();
        if (t.is_object() && t.contains("content") && t["content"].is_string())
          return t["content"].get<std::string>();
        return "";
      };
      out.bosToken = token("bos_token");
      out.eosToken = token("eos_token");
    }
  } else if (!planSource.empty()) {
    source = planSource;
    where = planWhere;
    out.bosToken = planBos;
    out.eosToken = planEos;
  }
  if (!source.empty()) {
    StatusOr<ChatTemplate> parsed = ChatTemplate::parse(source, where);
    if (!parsed.isOk())
      return parsed.status();
    out.chatTemplate.emplace(std::move(parsed.value()));
  }
  return out;
}

StatusOr<std::string> renderConversation(const LoadedChatTemplate &t,
                                         const std::vector<ChatTurn> &messages) {
  if (!t.chatTemplate)
    return failedPrecondition("no chat template");
  nlohmann::ordered_json context = {{"messages", nlohmann::ordered_json::array()},
                                    {"add_generation_prompt", true},
                                    {"bos_token", t.bosToken},
                                    {"eos_token", t.eosToken}};
  for (const ChatTurn &m : messages)
    context["messages"].push_back({{"role", m.role}, {"content", m.content}});
  return t.chatTemplate->render(context);
}

} // namespace weft::chat

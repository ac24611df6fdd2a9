// weft-chat-template: renders a chat template (a Jinja file, or the
// chat_template of a tokenizer_config.json) with a JSON context (messages,
// add_generation_prompt, bos_token, ...) from a file or stdin: the prompt
// text weft-serve builds for /v1/chat/completions.
#include "runtime/io/ReadFile.h"
#include "runtime/chat/ChatTemplate.h"

#include <fstream>
#include <iostream>
#include <sstream>

namespace {
int fail(const std::string &msg) {
  std::cerr << "weft-chat-template: error: " << msg << "\n";
  return 1;
}
// A regular file of at most 16 MiB (templates and configs are kilobytes);
// a FIFO or device is refused without blocking.
bool readFile(const std::string &path, std::string &out, std::string &error) {
  weft::StatusOr<std::string> text = weft::io::readRegularFile(path, 16u << 20, "the input");
  if (!text.isOk()) {
    error = text.status().message();
    return false;
  }
  out = std::move(text.value());
  return true;
}
} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::cerr << "usage: weft-chat-template (TEMPLATE.jinja | tokenizer_config.json) "
                 "[CONTEXT.json]   (context from stdin without one)\n";
    // Asked for help: 0; anything else that is not a call: an error.
    return argc == 2 ? 0 : 1;
  }
  std::string source, path = argv[1], error;
  if (!readFile(path, source, error))
    return fail(error);
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    if (weft::Status deep = weft::io::checkJsonNesting(source, weft::io::kMaxJsonDepth, path);
        !deep.isOk())
      return fail(deep.message());
    nlohmann::json config = nlohmann::json::parse(source, nullptr, false);
    if (config.is_discarded() || !config.is_object() || !config.contains("chat_template"))
      return fail(path + ": no chat_template in it");
    const nlohmann::json &t = config["chat_template"];
    if (t.is_string()) {
      source = t.get<std::string>();
    } else if (t.is_array()) { // named templates: the default one
      source.clear();
      for (const nlohmann::json &x : t)
        if (x.is_object() && x.value("name", "") == "default" && x.contains("template") &&
            x["template"].is_string())
          source = x["template"].get<std::string>();
      if (source.empty())
        return fail(path + ": chat_template has no 'default' template");
    } else {
      return fail(path + ": chat_template must be a string or a list");
    }
  }
  std::string contextText;
  if (argc == 3) {
    if (!readFile(argv[2], contextText, error))
      return fail(error);
  } else {
    // The same cap as a context file's.
    weft::StatusOr<std::string> in = weft::io::readStandardInput(16u << 20, "the context");
    if (!in.isOk())
      return fail(in.status().message());
    contextText = std::move(in.value());
  }
  if (weft::Status deep = weft::io::checkJsonNesting(contextText, weft::io::kMaxJsonDepth,
                                                    "the context");
      !deep.isOk())
    return fail(deep.message());
  nlohmann::ordered_json context = nlohmann::ordered_json::parse(contextText, nullptr, false);
  if (context.is_discarded() || !context.is_object())
    return fail("the context is not a JSON object");
  weft::StatusOr<weft::chat::ChatTemplate> t = weft::chat::ChatTemplate::parse(source, path);
  if (!t.isOk())
    return fail(t.status().message());
  weft::StatusOr<std::string> out = t->render(context);
  if (!out.isOk())
    return fail(out.status().message());
  std::cout << *out;
  return 0;
}

// Chat template source -> tree: Jinja's tags and whitespace control as
// transformers configures them (trim_blocks, lstrip_blocks), then a
// recursive-descent parser of statements and expressions.
#ifndef WEFT_RUNTIME_CHAT_TEMPLATEPARSER_H_
#define WEFT_RUNTIME_CHAT_TEMPLATEPARSER_H_

#include "runtime/chat/TemplateTree.h"

#include <string_view>

namespace weft::chat::detail {

// Throws RenderError naming `name` and the line.
NodeP parseTemplate(std::string_view source, const std::string &name);

} // namespace weft::chat::detail

#endif // WEFT_RUNTIME_CHAT_TEMPLATEPARSER_H_

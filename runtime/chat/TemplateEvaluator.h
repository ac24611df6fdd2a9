// Rendering a chat template tree over JSON values with Python's semantics
// where templates can see them (truthiness, str(), ==, +, in, slicing by
// code point, json.dumps for tojson), bounded by RenderLimits.
#ifndef WEFT_RUNTIME_CHAT_TEMPLATEEVALUATOR_H_
#define WEFT_RUNTIME_CHAT_TEMPLATEEVALUATOR_H_

#include "runtime/chat/ChatTemplate.h"
#include "runtime/chat/TemplateTree.h"

namespace weft::chat::detail {

// Throws RenderError (raise_exception, a type error, a limit) naming `name`.
std::string renderTemplate(const NodeP &root, const Json &context, const RenderLimits &limits,
                           const std::string &name);

} // namespace weft::chat::detail

#endif // WEFT_RUNTIME_CHAT_TEMPLATEEVALUATOR_H_

// weft-run as a person uses it in a terminal: the answer written as its
// tokens arrive, and --chat, a conversation read from stdin.
#ifndef WEFT_TOOLS_WEFT_RUN_INTERACTIVE_H_
#define WEFT_TOOLS_WEFT_RUN_INTERACTIVE_H_

#include "runtime/chat/ChatTemplateSource.h"
#include "runtime/engine/Generate.h"
#include "runtime/tokenizer/TextStream.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <cstdio>
#include <string>
#include <vector>

namespace weft::run {

// Writes a generation's text to stdout as its tokens arrive (or the ids,
// without a tokenizer), complete characters only.
class TokenPrinter {
public:
  explicit TokenPrinter(const tokenizer::Tokenizer *tok) : tok_(tok) {}
  void add(int32_t token);
  // No more tokens: what was held back (a character's first bytes) goes out.
  const std::string &finish();

private:
  void flush(bool ended);
  const tokenizer::Tokenizer *tok_;
  tokenizer::TextState text_;
  size_t count_ = 0;
};

// The one-line speed report of a generation.
void printSpeed(std::FILE *to, double loadSeconds, size_t promptTokens,
                const engine::Generation &g);

// --chat: a conversation on stdin/stdout. Each turn renders the whole
// conversation with the chat template and generates the answer, streamed.
// Returns the process exit code.
int runChat(engine::Engine &engine, const tokenizer::Tokenizer &tok,
            const chat::LoadedChatTemplate &chatTemplate, const std::string &system,
            int maxTokens, const std::vector<int32_t> &stopTokens,
            const engine::SamplingOptions &sampling, bool prefixCaching, bool quiet);

} // namespace weft::run

#endif // WEFT_TOOLS_WEFT_RUN_INTERACTIVE_H_

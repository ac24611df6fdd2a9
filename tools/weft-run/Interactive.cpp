// Streaming output and --chat for weft-run (see Interactive.h).
#include "tools/weft-run/Interactive.h"

#include <algorithm>
#include <iostream>

#include <unistd.h>

namespace weft::run {

void TokenPrinter::add(int32_t token) {
  if (!tok_) {
    std::printf("%s%d", count_++ ? " " : "", token);
    std::fflush(stdout);
    return;
  }
  text_.tokens.push_back(token);
  flush(false);
}

const std::string &TokenPrinter::finish() {
  if (tok_)
    flush(true);
  return text_.text;
}

void TokenPrinter::flush(bool ended) {
  tokenizer::updateText(tok_, {}, ended, text_);
  if (text_.ready > text_.sent) {
    std::fwrite(text_.text.data() + text_.sent, 1, text_.ready - text_.sent, stdout);
    std::fflush(stdout);
    text_.sent = text_.ready;
  }
}

void printSpeed(std::FILE *to, double loadSeconds, size_t promptTokens,
                const engine::Generation &g) {
  std::fprintf(to, "loaded in %.2f s; prefill %zu tokens in %.2f ms; decode %d steps in %.2f ms "
                   "(%.1f tok/s, %.3f ms/token)\n",
               loadSeconds, promptTokens, g.prefillSeconds * 1e3, g.decodeSteps,
               g.decodeSeconds * 1e3, g.decodeSteps ? g.decodeSteps / g.decodeSeconds : 0.0,
               g.decodeSteps ? g.decodeSeconds * 1e3 / g.decodeSteps : 0.0);
}

int runChat(engine::Engine &engine, const tokenizer::Tokenizer &tok,
            const chat::LoadedChatTemplate &chatTemplate, const std::string &system,
            int maxTokens, const std::vector<int32_t> &stopTokens,
            const engine::SamplingOptions &sampling, bool prefixCaching, bool quiet) {
  bool interactive = isatty(fileno(stdin)) != 0;
  // One scheduler for the whole conversation: with prefix caching, each
  // turn shares the KV blocks of the conversation so far.
  serve::SchedulerOptions schedulerOptions;
  schedulerOptions.prefixCaching = prefixCaching;
  serve::Scheduler scheduler(engine, schedulerOptions);
  int context = engine.kvLayout().maxContext();
  std::vector<chat::ChatTurn> conversation;
  auto reset = [&] {
    conversation.clear();
    if (!system.empty())
      conversation.push_back({"system", system});
  };
  reset();
  if (interactive && !quiet)
    std::fprintf(stderr, "weft-run: chat (context %d tokens); /reset starts over, /exit ends\n",
                 context);
  std::string line;
  for (uint64_t turn = 0;; ++turn) {
    if (interactive)
      std::fputs("> ", stderr);
    if (!std::getline(std::cin, line))
      break;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line == "/exit" || line == "/quit")
      break;
    if (line == "/reset") {
      reset();
      continue;
    }
    if (line.empty())
      continue;
    conversation.push_back({"user", line});
    StatusOr<std::string> text = chat::renderConversation(chatTemplate, conversation);
    StatusOr<std::vector<int32_t>> ids =
        text.isOk() ? tok.encode(*text, /*addSpecial=*/false)
                    : StatusOr<std::vector<int32_t>>(text.status());
    if (!ids.isOk() || ids->empty() || int(ids->size()) >= context) {
      std::string why = !text.isOk()  ? "the chat template refused the conversation: " +
                                            text.status().message()
                        : !ids.isOk() ? ids.status().message()
                        : ids->empty() ? std::string("the conversation renders to no tokens")
                                       : "the conversation (" + std::to_string(ids->size()) +
                                             " tokens) no longer fits the plan's context of " +
                                             std::to_string(context) + ": /reset starts over";
      std::fprintf(stderr, "weft-run: error: %s\n", why.c_str());
      conversation.pop_back();
      continue;
    }
    int budget = context - int(ids->size()) + 1;
    engine::SamplingOptions turnSampling = sampling;
    turnSampling.seed = sampling.seed + turn; // a new draw each turn, reproducible
    TokenPrinter printer(&tok);
    StatusOr<engine::Generation> gen = engine::generate(
        scheduler, engine, *ids, maxTokens > 0 ? std::min(maxTokens, budget) : budget, stopTokens,
        turnSampling, [&](int32_t t) { printer.add(t); });
    if (!gen.isOk()) {
      std::fprintf(stderr, "weft-run: error: %s\n", gen.status().message().c_str());
      return 1;
    }
    std::string answer = printer.finish();
    std::printf("\n");
    std::fflush(stdout);
    if (!quiet)
      std::fprintf(stderr, "(prompt %zu tokens, %d from the prefix cache; answer %zu tokens, "
                   "%.1f tok/s)\n",
                   ids->size(), gen->cachedPromptTokens, gen->tokens.size(),
                   gen->decodeSteps ? gen->decodeSteps / gen->decodeSeconds : 0.0);
    conversation.push_back({"assistant", answer});
  }
  return 0;
}

} // namespace weft::run

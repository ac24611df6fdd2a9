// The load of the reference serving workload against any OpenAI-compatible
// server: closed-loop users (or Poisson arrivals) sending streamed chat or
// completion requests, timed per request and per token.
#ifndef WEFT_TOOLS_WEFT_BENCH_LOADGENERATOR_H_
#define WEFT_TOOLS_WEFT_BENCH_LOADGENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace weft::bench {

struct LoadOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string apiKey;
  std::string model;
  bool chat = true;           // /v1/chat/completions, else /v1/completions
  int users = 100;            // closed loop: each sends the next when one ends
  int requestsPerUser = 10;   // the reference: 10 x N requests at N users
  double rate = 0;            // > 0: Poisson arrivals (requests/s) instead
  int requests = 0;           // with rate: how many in all (0: users x requestsPerUser)
  int maxTokens = 100;
  bool longContext = false;   // prepend a ~250-token paragraph to each prompt
  // > 0: prompts of this many random token ids in [100, promptIdLimit)
  // instead of text (completions only): the same prompt length on any
  // tokenizer. Every Llama, Mistral and Qwen2 vocabulary has 32,000 ids.
  int promptIds = 0;
  int promptIdLimit = 32000;
  // A system prompt the same for every request, so a server with prefix
  // caching computes it once: with promptIds, this many fixed ids before
  // each prompt's own; with text, a fixed passage of this many words (about
  // as many tokens) as the system message (chat) or before the prompt.
  int systemPromptTokens = 0;
  // Conversations (chat, closed loop): each user's requests are the turns of
  // conversations of this many turns; turn k sends the whole conversation
  // so far (every earlier question and answer) and a new question.
  int turns = 1;
  uint64_t seed = 1;
  double timeoutSeconds = 600;
};

struct RequestResult {
  bool ok = false;
  std::string error;          // why not ok
  double seconds = 0;         // end to end
  double ttft = 0;            // to the first text
  std::vector<double> gaps;   // between text chunks
  int outputTokens = 0;       // from usage, else counted chunks
  int promptTokens = 0;       // from usage
  int cachedTokens = 0;       // usage.prompt_tokens_details.cached_tokens
  int turn = 0;               // in its conversation, from 0
  std::string text;           // the answer
};

struct Summary {
  int users = 0, requests = 0, errors = 0;
  double wallSeconds = 0;
  double tpsMean = 0, tpsP50 = 0, tpsP10 = 0, tpsP1 = 0; // tokens/s per request
  double ttftMean = 0, ttftP50 = 0, ttftP99 = 0;
  double itlP50 = 0, itlP99 = 0;
  double totalTokensPerSecond = 0, requestsPerSecond = 0;
  // Prompt tokens of the answered requests and those the server's prefix
  // cache supplied (usage); TTFT p50 of conversations' first and last turns.
  uint64_t promptTokens = 0, cachedTokens = 0;
  double ttftFirstTurnP50 = 0, ttftLastTurnP50 = 0;
  std::vector<std::string> firstErrors;
};

// Runs one level of load and summarizes it. Never throws; connection
// failures and bad answers are counted as errors with their reason.
Summary runLoad(const LoadOptions &options, std::vector<RequestResult> *results = nullptr);

// The prompts: fixed one-sentence instructions, and the paragraph the
// long-context variant prepends.
const std::vector<std::string> &shortPrompts();
const std::string &longParagraph();
// A fixed passage of `words` words (the text system prompt).
std::string systemPassage(int words);

// Percentile of `v` (q in [0, 1]), nearest rank; 0 for an empty list.
double percentile(std::vector<double> v, double q);

// JSON of several levels, and an SVG of per-request tokens/s and TTFT
// against concurrency.
std::string summariesJson(const std::vector<Summary> &levels, const LoadOptions &options);
std::string summariesSvg(const std::vector<Summary> &levels, const std::string &title);

} // namespace weft::bench

#endif // WEFT_TOOLS_WEFT_BENCH_LOADGENERATOR_H_

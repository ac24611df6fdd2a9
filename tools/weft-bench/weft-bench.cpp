// weft-bench: the reference serving workload (N concurrent users, each
// sending streamed chat or completion requests in a closed loop, or Poisson
// arrivals) against any OpenAI-compatible server; prints per-request
// tokens/s, time to first token, inter-token latency, throughput and
// errors for each level, and writes them as JSON and an SVG picture.
#include "runtime/base/Text.h"
#include "tools/weft-bench/LoadGenerator.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int fail(const std::string &msg) {
  std::cerr << "weft-bench: error: " << msg << "\n";
  return 1;
}

// A number in [lo, hi], strictly (weft::parseDecimal: no "inf", spaces or
// trailing text).
bool parseNumber(const std::string &s, double lo, double hi, double &out) {
  std::optional<double> v = weft::parseDecimal(s, lo, hi);
  if (!v)
    return false;
  out = *v;
  return true;
}

const char *kUsage =
    "usage: weft-bench --model NAME [--url http://HOST:PORT] [--endpoint chat|completions]\n"
    "                  [--users 1,10,50,100] [--requests-per-user 10] [--rate R --requests N]\n"
    "                  [--max-tokens 100] [--long-context | --prompt-ids N] [--api-key KEY]\n"
    "                  [--seed S] [--system-prompt N] [--turns N]\n"
    "                  [--json FILE] [--svg FILE]\n"
    "  --system-prompt N  every request begins with the same system prompt of N words\n"
    "                     (with --prompt-ids: N fixed ids), for prefix caching\n"
    "  --turns N          chat, closed loop: each user's requests are conversations of N\n"
    "                     turns, each turn sending the conversation so far; prints the\n"
    "                     time to first token of first and last turns\n";

} // namespace

int main(int argc, char **argv) {
  weft::bench::LoadOptions o;
  std::vector<int> levels = {100};
  std::string jsonPath, svgPath;
  bool gaveUsers = false, gavePerUser = false, gaveRequests = false;
  if (const char *key = std::getenv("OPENAI_API_KEY"))
    o.apiKey = key;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    double v = 0;
    if (a == "--model") {
      o.model = value();
    } else if (a == "--url") {
      std::string url = value();
      const std::string prefix = "http://";
      if (url.rfind(prefix, 0) != 0)
        return fail("--url: expected http://HOST:PORT, got '" + url + "'");
      url = url.substr(prefix.size());
      while (!url.empty() && url.back() == '/')
        url.pop_back();
      size_t colon = url.rfind(':');
      if (colon == std::string::npos || !parseNumber(url.substr(colon + 1), 1, 65535, v))
        return fail("--url: expected http://HOST:PORT");
      o.host = url.substr(0, colon);
      o.port = int(v);
    } else if (a == "--endpoint") {
      std::string e = value();
      if (e != "chat" && e != "completions")
        return fail("--endpoint: expected chat or completions");
      o.chat = e == "chat";
    } else if (a == "--users") {
      gaveUsers = true;
      levels.clear();
      std::stringstream ss(value());
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!parseNumber(item, 1, 100000, v) || v != double(int(v)))
          return fail("--users: expected comma-separated positive integers");
        levels.push_back(int(v));
      }
      if (levels.empty())
        return fail("--users: expected comma-separated positive integers");
    } else if (a == "--requests-per-user") {
      gavePerUser = true;
      if (!parseNumber(value(), 1, 1e6, v) || v != double(int(v)))
        return fail("--requests-per-user: expected a positive integer");
      o.requestsPerUser = int(v);
    } else if (a == "--rate") {
      if (!parseNumber(value(), 1e-6, 1e6, v))
        return fail("--rate: expected requests per second above 0");
      o.rate = v;
    } else if (a == "--requests") {
      gaveRequests = true;
      if (!parseNumber(value(), 1, 1e6, v) || v != double(int(v)))
        return fail("--requests: expected a positive integer");
      o.requests = int(v);
    } else if (a == "--max-tokens") {
      if (!parseNumber(value(), 1, 1e6, v) || v != double(int(v)))
        return fail("--max-tokens: expected a positive integer");
      o.maxTokens = int(v);
    } else if (a == "--long-context") {
      o.longContext = true;
    } else if (a == "--prompt-ids") {
      if (!parseNumber(value(), 1, 1e6, v) || v != double(int(v)))
        return fail("--prompt-ids: expected a positive integer");
      o.promptIds = int(v);
    } else if (a == "--system-prompt") {
      if (!parseNumber(value(), 1, 1e6, v) || v != double(int(v)))
        return fail("--system-prompt: expected a positive number of words");
      o.systemPromptTokens = int(v);
    } else if (a == "--turns") {
      if (!parseNumber(value(), 1, 1e4, v) || v != double(int(v)))
        return fail("--turns: expected a positive integer");
      o.turns = int(v);
    } else if (a == "--api-key") {
      o.apiKey = value();
    } else if (a == "--seed") {
      if (!parseNumber(value(), 0, 1e15, v))
        return fail("--seed: expected a non-negative integer");
      o.seed = uint64_t(v);
    } else if (a == "--json") {
      jsonPath = value();
    } else if (a == "--svg") {
      svgPath = value();
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else {
      return fail("unknown argument '" + a + "'\n" + kUsage);
    }
  }
  if (o.model.empty())
    return fail(std::string("--model is required (the name the server serves)\n") + kUsage);
  // Closed loop (--users, --requests-per-user) or open loop (--rate,
  // --requests): one or the other.
  if (o.rate > 0 && (gaveUsers || gavePerUser))
    return fail(std::string(gaveUsers ? "--users" : "--requests-per-user") +
                " conflicts with --rate: --rate sends Poisson arrivals, not closed-loop users");
  if (gaveRequests && o.rate <= 0)
    return fail("--requests needs --rate (closed-loop runs send --requests-per-user per user)");
  if (o.rate > 0 && !gaveRequests)
    return fail("--rate needs --requests N: how many requests to send at that rate");
  if (o.promptIds > 0 && o.chat)
    return fail("--prompt-ids sends token ids, which only /v1/completions takes: add "
                "--endpoint completions");
  if (o.promptIds > 0 && o.longContext)
    return fail("--prompt-ids and --long-context: expected one of them");
  if (o.turns > 1 && !o.chat)
    return fail("--turns sends conversations, which only /v1/chat/completions takes");
  if (o.turns > 1 && o.rate > 0)
    return fail("--turns needs closed-loop users (each turn follows the answer before it), "
                "not --rate");
  if (o.turns > 1 && o.requestsPerUser % o.turns)
    return fail("--requests-per-user " + std::to_string(o.requestsPerUser) +
                " is not a multiple of --turns " + std::to_string(o.turns) +
                ": every conversation has all its turns");
  if (o.rate > 0)
    levels = {0};
  std::printf("| users | requests | errors | tok/s per request (mean / p50 / p10 / p1) | "
              "TTFT mean / p50 / p99 | ITL p50 / p99 | total tok/s | req/s |\n"
              "|---|---|---|---|---|---|---|---|\n");
  std::vector<weft::bench::Summary> results;
  for (int users : levels) {
    o.users = users;
    weft::bench::Summary s = weft::bench::runLoad(o);
    std::printf("| %s | %d | %d | %.1f / %.1f / %.1f / %.1f | %.0f / %.0f / %.0f ms | "
                "%.1f / %.1f ms | %.0f | %.2f |\n",
                o.rate > 0 ? ("rate " + std::to_string(o.rate)).c_str()
                           : std::to_string(users).c_str(),
                s.requests, s.errors, s.tpsMean, s.tpsP50, s.tpsP10, s.tpsP1, s.ttftMean * 1e3,
                s.ttftP50 * 1e3, s.ttftP99 * 1e3, s.itlP50 * 1e3, s.itlP99 * 1e3,
                s.totalTokensPerSecond, s.requestsPerSecond);
    if (s.cachedTokens > 0 || o.systemPromptTokens > 0 || o.turns > 1)
      std::printf("    prompt tokens %llu, %llu (%.0f%%) from the server's prefix cache\n",
                  (unsigned long long)s.promptTokens, (unsigned long long)s.cachedTokens,
                  s.promptTokens ? 100.0 * double(s.cachedTokens) / double(s.promptTokens) : 0.0);
    if (o.turns > 1)
      std::printf("    TTFT p50: first turns %.0f ms, turn %d %.0f ms\n", s.ttftFirstTurnP50 * 1e3,
                  o.turns, s.ttftLastTurnP50 * 1e3);
    for (const std::string &e : s.firstErrors)
      std::printf("    error: %s\n", e.c_str());
    std::fflush(stdout);
    results.push_back(s);
  }
  if (!jsonPath.empty()) {
    std::ofstream f(jsonPath);
    f << weft::bench::summariesJson(results, o);
    if (!f)
      return fail(jsonPath + ": cannot write");
  }
  if (!svgPath.empty()) {
    std::ofstream f(svgPath);
    f << weft::bench::summariesSvg(results, "weft-bench: " + o.model + ", max_tokens " +
                                                std::to_string(o.maxTokens));
    if (!f)
      return fail(svgPath + ": cannot write");
  }
  int errors = 0;
  for (const weft::bench::Summary &s : results)
    errors += s.errors;
  return errors ? 2 : 0;
}

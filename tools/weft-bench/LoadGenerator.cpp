// Load generation and its statistics (see LoadGenerator.h).
#include "tools/weft-bench/LoadGenerator.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

namespace weft::bench {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> &shortPrompts() {
  static const std::vector<std::string> prompts = {
      "Explain in a few sentences why the sky looks blue during the day.",
      "Write a short poem about a lighthouse keeper and the winter sea.",
      "List five practical tips for keeping a sourdough starter healthy.",
      "Summarize the main causes of the French Revolution for a student.",
      "Describe how a bicycle gear system makes climbing hills easier.",
      "Give three ideas for a rainy afternoon with two young children.",
      "What are the differences between a comet and an asteroid?",
      "Draft a polite email asking a landlord to repair a leaking tap.",
      "Explain what a hash table is and when you would use one.",
      "Suggest a simple vegetarian dinner that takes under thirty minutes.",
      "Tell a short story about a robot that learns to paint.",
      "How does compound interest work? Use a small example.",
      "Describe the water cycle as if speaking to a ten-year-old.",
      "What should someone pack for a three-day hike in the mountains?",
  };
  return prompts;
}

const std::string &longParagraph() {
  static const std::string p =
      "The following notes come from a small town's archive. In the spring the river rose "
      "higher than anyone could remember, and the old stone bridge, built by a guild of "
      "masons two centuries earlier, held while the wooden footbridge downstream was carried "
      "away. The council met in the school hall because the town hall's cellar had flooded, "
      "and the minutes record long arguments about whether to rebuild the footbridge in "
      "timber, in steel, or not at all. A retired engineer proposed a design with a single "
      "arch and no piers in the water, so that floating debris could pass beneath it; the "
      "baker argued that the money would be better spent on the flood walls along the "
      "market square; the schoolteacher reminded everyone that children crossed the river "
      "twice a day and that the detour by the stone bridge added half an hour to their walk. "
      "In the end the council voted to build the single arch, to raise the flood walls by "
      "one course of stone, and to plant willows along the upstream banks, whose roots, the "
      "engineer said, would hold the soil when the next high water came. The bridge opened "
      "in the autumn with a procession, a brass band and a great deal of rain. With these "
      "notes in mind, answer the question that follows. ";
  return p;
}

std::string systemPassage(int words) {
  // The paragraph's words, repeated: a fixed text of exactly `words` words.
  std::vector<std::string> all;
  const std::string &p = longParagraph();
  for (size_t at = 0; at < p.size();) {
    size_t end = p.find(' ', at);
    if (end == std::string::npos)
      end = p.size();
    if (end > at)
      all.push_back(p.substr(at, end - at));
    at = end + 1;
  }
  std::string out = "You answer questions about the notes below.";
  for (int i = 0; i < words && !all.empty(); ++i)
    out += " " + all[size_t(i) % all.size()];
  return out;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t i = size_t(std::llround(q * double(v.size() - 1)));
  return v[std::min(i, v.size() - 1)];
}

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// `input`: the messages (chat) or the prompt (completions).
RequestResult oneRequest(httplib::Client &client, const LoadOptions &o, const json &input) {
  RequestResult r;
  json body = {{"model", o.model},
               {"max_tokens", o.maxTokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (o.chat)
    body["messages"] = input;
  else
    body["prompt"] = input;
  httplib::Request req;
  req.method = "POST";
  req.path = o.chat ? "/v1/chat/completions" : "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.apiKey.empty())
    req.set_header("Authorization", "Bearer " + o.apiKey);
  std::string buffer, errorBody;
  bool done = false, sawText = false, usage = false;
  int chunks = 0;
  Clock::time_point start = Clock::now(), last = start;
  req.content_receiver = [&](const char *data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    size_t at;
    while ((at = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, at);
      buffer.erase(0, at + 2);
      if (event.rfind("data: ", 0) != 0) {
        errorBody += event;
        continue;
      }
      std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) {
        errorBody += payload;
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        const json &u = j["usage"];
        r.outputTokens = u.value("completion_tokens", 0);
        r.promptTokens = u.value("prompt_tokens", 0);
        if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
          r.cachedTokens = u["prompt_tokens_details"].value("cached_tokens", 0);
        usage = true;
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
        continue;
      const json &c = j["choices"][0];
      std::string piece;
      if (o.chat && c.contains("delta") && c["delta"].contains("content") &&
          c["delta"]["content"].is_string())
        piece = c["delta"]["content"];
      else if (!o.chat && c.contains("text") && c["text"].is_string())
        piece = c["text"];
      if (piece.empty())
        continue;
      r.text += piece;
      ++chunks;
      if (!sawText) {
        r.ttft = since(start);
        sawText = true;
      } else {
        r.gaps.push_back(std::chrono::duration<double>(Clock::now() - last).count());
      }
      last = Clock::now();
    }
    return true;
  };
  httplib::Result res = client.send(req);
  r.seconds = since(start);
  if (!res) {
    r.error = "no answer: " + httplib::to_string(res.error());
    return r;
  }
  if (res->status != 200) {
    std::string b = res->body.empty() ? errorBody : res->body;
    r.error = "HTTP " + std::to_string(res->status) + ": " + b.substr(0, 200);
    return r;
  }
  if (!done) {
    r.error = "the stream ended without data: [DONE]";
    return r;
  }
  if (!usage)
    r.outputTokens = chunks;
  if (!sawText)
    r.ttft = r.seconds;
  r.ok = true;
  return r;
}

std::unique_ptr<httplib::Client> makeClient(const LoadOptions &o) {
  auto c = std::make_unique<httplib::Client>(o.host, o.port);
  auto t = std::chrono::duration<double>(o.timeoutSeconds);
  c->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  c->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  c->set_connection_timeout(30);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true); // a request is not held behind the last one's ACK
  return c;
}

// The shared system prompt's ids (the same for every request of a run).
json systemIds(const LoadOptions &o) {
  std::mt19937_64 rng(0x5157e3ull);
  json ids = json::array();
  for (int i = 0; i < o.systemPromptTokens; ++i)
    ids.push_back(100 + int(rng() % uint64_t(std::max(1, o.promptIdLimit - 100))));
  return ids;
}

// A new question: ids, or text.
json questionFor(const LoadOptions &o, std::mt19937_64 &rng) {
  if (o.promptIds > 0) {
    json ids = json::array();
    for (int i = 0; i < o.promptIds; ++i)
      ids.push_back(100 + int(rng() % uint64_t(std::max(1, o.promptIdLimit - 100))));
    return ids;
  }
  const std::vector<std::string> &p = shortPrompts();
  std::string text = p[rng() % p.size()];
  return o.longContext ? longParagraph() + text : text;
}

// The request's input for `question` after `history` (a conversation's
// earlier messages: user, assistant, ...): the messages (chat) or the
// prompt (completions), with the system prompt first.
json inputFor(const LoadOptions &o, const json &history, const json &question) {
  if (o.chat) {
    json messages = json::array();
    if (o.systemPromptTokens > 0)
      messages.push_back({{"role", "system"}, {"content", systemPassage(o.systemPromptTokens)}});
    for (const json &m : history)
      messages.push_back(m);
    messages.push_back({{"role", "user"}, {"content", question}});
    return messages;
  }
  if (o.systemPromptTokens <= 0)
    return question;
  if (question.is_array()) {
    json ids = systemIds(o);
    for (const json &t : question)
      ids.push_back(t);
    return ids;
  }
  return systemPassage(o.systemPromptTokens) + "\n\n" + question.get<std::string>();
}

} // namespace

Summary runLoad(const LoadOptions &o, std::vector<RequestResult> *out) {
  std::vector<RequestResult> results;
  std::mutex m;
  auto record = [&](RequestResult r) {
    std::lock_guard<std::mutex> l(m);
    results.push_back(std::move(r));
  };
  Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  if (o.rate > 0) {
    // Open loop: arrivals of a Poisson process, each on its own thread.
    int total = o.requests > 0 ? o.requests : o.users * o.requestsPerUser;
    std::mt19937_64 rng(o.seed);
    std::exponential_distribution<double> gap(o.rate);
    double at = 0;
    for (int i = 0; i < total; ++i) {
      at += gap(rng);
      json text = inputFor(o, json::array(), questionFor(o, rng));
      threads.emplace_back([&, at, text] {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(at)));
        std::unique_ptr<httplib::Client> c = makeClient(o);
        record(oneRequest(*c, o, text));
      });
    }
  } else {
    for (int u = 0; u < o.users; ++u)
      threads.emplace_back([&, u] {
        std::mt19937_64 rng(o.seed * 7919 + uint64_t(u));
        std::unique_ptr<httplib::Client> c = makeClient(o);
        json history = json::array(); // the conversation so far
        for (int i = 0; i < o.requestsPerUser; ++i) {
          int turn = i % std::max(1, o.turns);
          if (turn == 0)
            history = json::array();
          json question = questionFor(o, rng);
          RequestResult r = oneRequest(*c, o, inputFor(o, history, question));
          r.turn = turn;
          if (o.turns > 1) {
            history.push_back({{"role", "user"}, {"content", question}});
            history.push_back({{"role", "assistant"}, {"content", r.text}});
          }
          record(std::move(r));
        }
      });
  }
  for (std::thread &t : threads)
    t.join();
  Summary s;
  s.wallSeconds = since(start);
  s.users = o.rate > 0 ? 0 : o.users;
  std::vector<double> tps, ttft, itl, firstTurns, lastTurns;
  double tokens = 0;
  for (const RequestResult &r : results) {
    ++s.requests;
    if (!r.ok) {
      ++s.errors;
      if (s.firstErrors.size() < 5)
        s.firstErrors.push_back(r.error);
      continue;
    }
    tps.push_back(r.seconds > 0 ? r.outputTokens / r.seconds : 0);
    ttft.push_back(r.ttft);
    itl.insert(itl.end(), r.gaps.begin(), r.gaps.end());
    tokens += r.outputTokens;
    s.promptTokens += uint64_t(r.promptTokens);
    s.cachedTokens += uint64_t(r.cachedTokens);
    if (o.turns > 1 && r.turn == 0)
      firstTurns.push_back(r.ttft);
    if (o.turns > 1 && r.turn == o.turns - 1)
      lastTurns.push_back(r.ttft);
  }
  auto mean = [](const std::vector<double> &v) {
    double sum = 0;
    for (double x : v)
      sum += x;
    return v.empty() ? 0 : sum / double(v.size());
  };
  s.tpsMean = mean(tps);
  s.tpsP50 = percentile(tps, 0.5);
  s.tpsP10 = percentile(tps, 0.1); // the slow tail: 10% of requests are slower
  s.tpsP1 = percentile(tps, 0.01);
  s.ttftMean = mean(ttft);
  s.ttftP50 = percentile(ttft, 0.5);
  s.ttftP99 = percentile(ttft, 0.99);
  s.itlP50 = percentile(itl, 0.5);
  s.itlP99 = percentile(itl, 0.99);
  s.ttftFirstTurnP50 = percentile(firstTurns, 0.5);
  s.ttftLastTurnP50 = percentile(lastTurns, 0.5);
  s.totalTokensPerSecond = s.wallSeconds > 0 ? tokens / s.wallSeconds : 0;
  s.requestsPerSecond = s.wallSeconds > 0 ? double(s.requests - s.errors) / s.wallSeconds : 0;
  if (out)
    *out = std::move(results);
  return s;
}

std::string summariesJson(const std::vector<Summary> &levels, const LoadOptions &o) {
  json j = {{"endpoint", o.chat ? "/v1/chat/completions" : "/v1/completions"},
            {"model", o.model},
            {"max_tokens", o.maxTokens},
            {"long_context", o.longContext},
            {"prompt_ids", o.promptIds},
            {"system_prompt_tokens", o.systemPromptTokens},
            {"turns", o.turns},
            {"levels", json::array()}};
  for (const Summary &s : levels)
    j["levels"].push_back({{"users", s.users},
                           {"requests", s.requests},
                           {"errors", s.errors},
                           {"wall_seconds", s.wallSeconds},
                           {"tokens_per_second_per_request",
                            {{"mean", s.tpsMean}, {"p50", s.tpsP50}, {"p10", s.tpsP10},
                             {"p1", s.tpsP1}}},
                           {"ttft_seconds", {{"mean", s.ttftMean}, {"p50", s.ttftP50},
                                             {"p99", s.ttftP99}}},
                           {"itl_seconds", {{"p50", s.itlP50}, {"p99", s.itlP99}}},
                           {"total_tokens_per_second", s.totalTokensPerSecond},
                           {"requests_per_second", s.requestsPerSecond},
                           {"prompt_tokens", s.promptTokens},
                           {"cached_prompt_tokens", s.cachedTokens},
                           {"ttft_p50_first_turn_seconds", s.ttftFirstTurnP50},
                           {"ttft_p50_last_turn_seconds", s.ttftLastTurnP50},
                           {"first_errors", s.firstErrors}});
  return j.dump(2);
}

std::string summariesSvg(const std::vector<Summary> &levels, const std::string &title) {
  // Two panels side by side: tokens/s per request (mean and p10) and TTFT
  // (p50 and p99), each against the number of users.
  const int w = 760, h = 340, panel = 330, top = 40, bottom = 50, left = 60;
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) +
                    "\" height=\"" + std::to_string(h) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" "
                    "height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" "
                    "font-size=\"14\">" + title + "</text>\n";
  char buf[256];
  auto series = [&](int x0, const char *label, std::vector<std::pair<double, double>> a,
                    std::vector<std::pair<double, double>> b, const char *na, const char *nb) {
    double xmax = 1, ymax = 1e-9;
    for (auto &p : a) xmax = std::max(xmax, p.first), ymax = std::max(ymax, p.second);
    for (auto &p : b) ymax = std::max(ymax, p.second);
    ymax *= 1.1;
    auto X = [&](double v) { return x0 + left + (panel - left - 10) * v / xmax; };
    auto Y = [&](double v) { return top + (h - top - bottom) * (1 - v / ymax); };
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%d\" y=\"%d\">%s</text>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                  "y2=\"%.1f\" stroke=\"black\"/>\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                  "y2=\"%.1f\" stroke=\"black\"/>\n",
                  x0 + left, top - 8, label, X(0), Y(0), X(xmax), Y(0), X(0), Y(0), X(0), Y(ymax));
    out += buf;
    for (int i = 0; i <= 4; ++i) {
      double v = ymax * i / 4;
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", X(0) - 4,
                    Y(v) + 4, v);
      out += buf;
    }
    for (auto &p : a) {
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X(p.first),
                    h - bottom + 16, p.first);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">users</text>\n",
                  X(xmax / 2), h - 12);
    out += buf;
    const char *colors[2] = {"#1f77b4", "#d62728"};
    const char *names[2] = {na, nb};
    std::vector<std::pair<double, double>> *lists[2] = {&a, &b};
    for (int k = 0; k < 2; ++k) {
      std::string pts;
      for (auto &p : *lists[k]) {
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(p.first), Y(p.second));
        pts += buf;
      }
      out += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + colors[k] +
             "\" stroke-width=\"2\"/>\n";
      std::snprintf(buf, sizeof buf,
                    "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", x0 + panel - 90,
                    top + 14 + 16 * k, colors[k], names[k]);
      out += buf;
    }
  };
  std::vector<std::pair<double, double>> mean, p10, ttft50, ttft99;
  for (const Summary &s : levels) {
    mean.push_back({double(s.users), s.tpsMean});
    p10.push_back({double(s.users), s.tpsP10});
    ttft50.push_back({double(s.users), s.ttftP50});
    ttft99.push_back({double(s.users), s.ttftP99});
  }
  series(0, "tokens/s per request", mean, p10, "mean", "p10");
  series(panel + 40, "time to first token (s)", ttft50, ttft99, "p50", "p99");
  out += "</svg>\n";
  return out;
}

} // namespace weft::bench

// Prometheus text exposition of the server's metrics.
#include "runtime/server/Metrics.h"

#include <cstdio>

namespace weft::server {

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
void line(std::string &out, const std::string &name, const std::string &help,
          const char *type, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
         num(value) + "\n";
}
} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i])
    ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string &out, const std::string &name, const std::string &help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += counts_.back();
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10}),
      itl_({0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120}) {}

void Metrics::observeFirstToken(double s) {
  std::lock_guard<std::mutex> l(m_);
  ttft_.observe(s);
}
void Metrics::observeInterToken(double s) {
  std::lock_guard<std::mutex> l(m_);
  itl_.observe(s);
}
void Metrics::observeEnd(double s, int prompt, int generated, const char *finish) {
  std::lock_guard<std::mutex> l(m_);
  e2e_.observe(s);
  promptTokens_ += uint64_t(prompt);
  generatedTokens_ += uint64_t(generated);
  ++finished_[finish ? finish : "none"];
}
void Metrics::countDisconnect() {
  std::lock_guard<std::mutex> l(m_);
  ++disconnects_;
}

std::string Metrics::render(const serve::SchedulerStats &st, int inFlight) const {
  std::lock_guard<std::mutex> l(m_);
  std::string out;
  line(out, "weft_requests_running", "Sequences in the scheduler's running set.", "gauge",
       st.running);
  line(out, "weft_requests_waiting", "Requests waiting for admission (or preempted).", "gauge",
       st.waiting);
  line(out, "weft_requests_in_flight", "HTTP requests not yet answered.", "gauge", inFlight);
  line(out, "weft_kv_cache_usage_ratio",
       "Share of the KV cache pages in use (cached blocks no request uses count as free).",
       "gauge", st.pagesTotal ? 1.0 - double(st.pagesFree) / double(st.pagesTotal) : 0.0);
  line(out, "weft_prefix_cache_queries_total",
       "Admissions that looked their prompt up in the prefix cache.", "counter",
       double(st.prefixQueries));
  line(out, "weft_prefix_cache_hit_tokens_total",
       "Prompt tokens taken from the prefix cache instead of computed.", "counter",
       double(st.prefixHitTokens));
  line(out, "weft_prefix_cache_blocks", "KV blocks held by the prefix cache.", "gauge",
       st.cachedPages);
  line(out, "weft_prefix_cache_blocks_in_use",
       "Cached KV blocks that running requests use (the others may be evicted).", "gauge",
       st.cachedPages - st.idleCachedPages);
  line(out, "weft_prompt_tokens_total", "Prompt tokens of finished requests.", "counter",
       double(promptTokens_));
  line(out, "weft_generation_tokens_total", "Tokens generated for finished requests.",
       "counter", double(generatedTokens_));
  line(out, "weft_client_disconnects_total", "Streams whose client left before the end.",
       "counter", double(disconnects_));
  out += "# HELP weft_requests_finished_total Requests finished, by reason.\n"
         "# TYPE weft_requests_finished_total counter\n";
  for (const auto &[reason, n] : finished_)
    out += "weft_requests_finished_total{finish_reason=\"" + reason + "\"} " +
           std::to_string(n) + "\n";
  ttft_.render(out, "weft_time_to_first_token_seconds",
               "From arrival to the first generated token.");
  itl_.render(out, "weft_inter_token_latency_seconds", "Between consecutive tokens of a request.");
  e2e_.render(out, "weft_e2e_request_latency_seconds", "From arrival to the last token.");
  return out;
}

} // namespace weft::server

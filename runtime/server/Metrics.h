// Counters and latency histograms of the server, rendered in Prometheus'
// text format for GET /metrics.
#ifndef WEFT_RUNTIME_SERVER_METRICS_H_
#define WEFT_RUNTIME_SERVER_METRICS_H_

#include "runtime/serve/Scheduler.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace weft::server {

class Histogram {
public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // `name`_bucket{le=...}, _sum and _count lines.
  void render(std::string &out, const std::string &name, const std::string &help) const;

private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_; // per bucket (not cumulative); last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
public:
  Metrics();
  void observeFirstToken(double seconds);
  void observeInterToken(double seconds);
  void observeEnd(double seconds, int promptTokens, int generatedTokens, const char *finish);
  void countDisconnect();
  // Gauges come from the caller: the scheduler's latest state and the HTTP
  // requests not yet answered.
  std::string render(const serve::SchedulerStats &scheduler, int inFlight) const;

private:
  mutable std::mutex m_;
  Histogram ttft_, itl_, e2e_;
  uint64_t promptTokens_ = 0, generatedTokens_ = 0, disconnects_ = 0;
  std::map<std::string, uint64_t> finished_;
};

} // namespace weft::server

#endif // WEFT_RUNTIME_SERVER_METRICS_H_

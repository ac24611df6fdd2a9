#include "runtime/base/Progress.h"

#include <unistd.h>

namespace weft {

Progress::Progress(std::FILE *out, bool interactive, std::string prefix)
    : out_(out), interactive_(interactive), prefix_(std::move(prefix)) {}

Progress Progress::forStderr(std::string prefix) {
  return Progress(stderr, isatty(fileno(stderr)) != 0, std::move(prefix));
}

namespace {

// "37/79", or "3.21/16.06 GB" for bytes.
std::string counts(uint64_t done, uint64_t total, bool bytes) {
  char buf[64];
  if (bytes)
    std::snprintf(buf, sizeof buf, "%.2f/%.2f GB", double(done) / 1e9, double(total) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%llu/%llu", (unsigned long long)done,
                  (unsigned long long)total);
  return buf;
}

// "79", or "16.06 GB" for bytes.
std::string amount(uint64_t total, bool bytes) {
  char buf[32];
  if (bytes)
    std::snprintf(buf, sizeof buf, "%.2f GB", double(total) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%llu", (unsigned long long)total);
  return buf;
}

} // namespace

std::string Progress::bar(const std::string &phase, uint64_t done, uint64_t total,
                          double seconds, int width, bool bytes) {
  if (done > total)
    done = total;
  int filled = total ? int(uint64_t(width) * done / total) : width;
  std::string s = phase + " [";
  s.append(size_t(filled), '#');
  s.append(size_t(width - filled), '-');
  char time[32];
  std::snprintf(time, sizeof time, "  %.1f s", seconds);
  return s + "] " + counts(done, total, bytes) + time;
}

void Progress::update(const std::string &phase, uint64_t done, uint64_t total) {
  auto now = std::chrono::steady_clock::now();
  bool finished = done >= total;
  // A phase reported finished again (a caller's closing call) shows once.
  if (finished && phase_.empty() && phase == finished_)
    return;
  bool newPhase = phase != phase_;
  if (newPhase) {
    if (open_)
      std::fputc('\n', out_);
    open_ = false;
    phase_ = phase;
    start_ = now;
  }
  double seconds = std::chrono::duration<double>(now - start_).count();
  bool bytes = bytePhases_.count(phase) != 0;
  if (interactive_) {
    std::fprintf(out_, "\r%s\033[K", bar(phase, done, total, seconds, 30, bytes).c_str());
    open_ = !finished;
    if (finished)
      std::fputc('\n', out_);
  } else if (newPhase && !finished) {
    std::fprintf(out_, "%s%s (%s)...\n", prefix_.c_str(), phase.c_str(),
                 amount(total, bytes).c_str());
  } else if (finished) {
    std::fprintf(out_, "%s%s: %s in %.1f s\n", prefix_.c_str(), phase.c_str(),
                 counts(done, total, bytes).c_str(), seconds);
  }
  if (finished) {
    finished_ = phase;
    phase_.clear();
  } else {
    finished_.clear();
  }
  std::fflush(out_);
}

} // namespace weft

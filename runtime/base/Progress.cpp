#include "runtime/base/Progress.h"

#include <unistd.h>

namespace weft {

Progress::Progress(std::FILE *out, bool interactive, std::string prefix)
    : out_(out), interactive_(interactive), prefix_(std::move(prefix)) {}

Progress Progress::forStderr(std::string prefix) {
  return Progress(stderr, isatty(fileno(stderr)) != 0, std::move(prefix));
}

std::string Progress::bar(const std::string &phase, uint64_t done, uint64_t total,
                          double seconds, int width) {
  if (done > total)
    done = total;
  int filled = total ? int(uint64_t(width) * done / total) : width;
  std::string s = phase + " [";
  s.append(size_t(filled), '#');
  s.append(size_t(width - filled), '-');
  char tail[64];
  std::snprintf(tail, sizeof tail, "] %llu/%llu  %.1f s", (unsigned long long)done,
                (unsigned long long)total, seconds);
  return s + tail;
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
  if (interactive_) {
    std::fprintf(out_, "\r%s\033[K", bar(phase, done, total, seconds).c_str());
    open_ = !finished;
    if (finished)
      std::fputc('\n', out_);
  } else if (newPhase && !finished) {
    std::fprintf(out_, "%s%s (%llu)...\n", prefix_.c_str(), phase.c_str(),
                 (unsigned long long)total);
  } else if (finished) {
    std::fprintf(out_, "%s%s: %llu/%llu in %.1f s\n", prefix_.c_str(), phase.c_str(),
                 (unsigned long long)done, (unsigned long long)total, seconds);
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

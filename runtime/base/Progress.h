// A progress display for long operations (compiling kernels, loading
// weights): a bar redrawn in place on a terminal, one line per phase
// otherwise (logs, CI), so that the output stays readable either way.
#ifndef WEFT_RUNTIME_BASE_PROGRESS_H_
#define WEFT_RUNTIME_BASE_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>

namespace weft {

class Progress {
public:
  // `prefix` starts each line that is not a bar ("weft-compile: ").
  // `interactive`: draw a bar in place (true when `out` is a terminal).
  Progress(std::FILE *out, bool interactive, std::string prefix = "");
  // Defaults: stderr, a bar when stderr is a terminal.
  static Progress forStderr(std::string prefix = "");

  // Reports that `done` of `total` units of `phase` are finished. A new
  // phase starts a new line; done == total ends it (with the elapsed time).
  void update(const std::string &phase, uint64_t done, uint64_t total);

  // Shows the counts of `phase` as bytes ("3.21/16.06 GB") instead of units.
  void countBytes(const std::string &phase) { bytePhases_.insert(phase); }

  // The bar as drawn: "phase [#####---------]  37/79  1.2 s" (width cells).
  static std::string bar(const std::string &phase, uint64_t done, uint64_t total,
                         double seconds, int width = 30, bool bytes = false);

private:
  std::FILE *out_;
  bool interactive_;
  std::string prefix_;
  std::string phase_;    // the phase in progress, "" between phases
  std::string finished_; // the phase last reported finished
  std::set<std::string> bytePhases_;
  bool open_ = false; // a bar is drawn and not yet ended with a newline
  std::chrono::steady_clock::time_point start_;
};

} // namespace weft

#endif // WEFT_RUNTIME_BASE_PROGRESS_H_

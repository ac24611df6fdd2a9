// The progress display: a bar on a terminal, one line per phase elsewhere.
#include "runtime/base/Progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace {

std::string contents(std::FILE *f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, f))
    s.append(buf, n);
  return s;
}

} // namespace

TEST(Progress, BarShowsTheFractionDone) {
  EXPECT_EQ(weft::Progress::bar("compiling", 0, 4, 0.0, 8), "compiling [--------] 0/4  0.0 s");
  EXPECT_EQ(weft::Progress::bar("compiling", 1, 4, 0.25, 8), "compiling [##------] 1/4  0.2 s");
  EXPECT_EQ(weft::Progress::bar("compiling", 4, 4, 1.0, 8), "compiling [########] 4/4  1.0 s");
  EXPECT_EQ(weft::Progress::bar("x", 9, 4, 0.0, 4), "x [####] 4/4  0.0 s"); // clamped
  EXPECT_EQ(weft::Progress::bar("x", 0, 0, 0.0, 4), "x [####] 0/0  0.0 s");
}

TEST(Progress, LogLinesOnePerPhaseStartAndEnd) {
  std::FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  weft::Progress p(f, /*interactive=*/false, "tool: ");
  p.update("loading", 0, 3);
  p.update("loading", 1, 3);
  p.update("loading", 3, 3);
  p.update("loading", 3, 3); // a repeated closing call shows once
  p.update("warming", 2, 2);
  std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(out.find("tool: loading (3)...\n"), 0u) << out;
  EXPECT_NE(out.find("tool: loading: 3/3 in "), std::string::npos) << out;
  EXPECT_EQ(out.find("tool: loading: 3/3 in "), out.rfind("tool: loading: 3/3 in ")) << out;
  EXPECT_NE(out.find("tool: warming: 2/2 in "), std::string::npos) << out;
}

TEST(Progress, TerminalRedrawsInPlace) {
  std::FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  weft::Progress p(f, /*interactive=*/true);
  p.update("compiling", 1, 2);
  p.update("compiling", 2, 2);
  std::string out = contents(f);
  std::fclose(f);
  EXPECT_EQ(out.front(), '\r');
  EXPECT_NE(out.find("1/2"), std::string::npos);
  EXPECT_EQ(out.back(), '\n'); // the finished bar stays, on its own line
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
}

TEST(Progress, BytePhasesShowGigabytes) {
  EXPECT_EQ(weft::Progress::bar("loading weights", 3210000000ull, 16060000000ull, 0.5, 4, true),
            "loading weights [----] 3.21/16.06 GB  0.5 s");
  std::FILE *f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  weft::Progress p(f, /*interactive=*/false);
  p.countBytes("loading weights");
  p.update("loading weights", 0, 16060522496ull);
  p.update("loading weights", 16060522496ull, 16060522496ull);
  std::string out = contents(f);
  std::fclose(f);
  EXPECT_NE(out.find("loading weights (16.06 GB)...\n"), std::string::npos) << out;
  EXPECT_NE(out.find("loading weights: 16.06/16.06 GB in "), std::string::npos) << out;
}

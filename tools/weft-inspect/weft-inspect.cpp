// weft-inspect PLAN [--json|--summary]: verifies a plan file and prints a
// summary (the default) or its complete JSON rendering.
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/PlanReader.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr const char *kUsage =
    "usage: weft-inspect PLAN [--json|--summary]\n"
    "\n"
    "Verifies a Weft plan file (.weft) and prints it.\n"
    "  --summary  model, topology, partition, memory, kernels, buckets (default)\n"
    "  --json     every field as JSON (cubins as size and FNV-1a checksum)\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "weft-inspect: error: %s\n", message.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  enum class Mode { Summary, Json } mode = Mode::Summary;
  const char *modeFlag = nullptr;
  std::string path;
  bool havePath = false;
  bool endOfOptions = false;
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    if (!endOfOptions && arg[0] == '-' && arg[1] != '\0') {
      if (!std::strcmp(arg, "--")) {
        endOfOptions = true;
      } else if (!std::strcmp(arg, "-h") || !std::strcmp(arg, "--help")) {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (!std::strcmp(arg, "--json") || !std::strcmp(arg, "--summary")) {
        if (modeFlag && std::strcmp(modeFlag, arg))
          return fail(std::string(modeFlag) + " and " + arg + " both given: expected one of them");
        modeFlag = arg;
        mode = arg[2] == 'j' ? Mode::Json : Mode::Summary;
      } else {
        return fail(std::string("unknown option '") + arg +
                    "': expected --json or --summary (see --help)");
      }
      continue;
    }
    if (havePath)
      return fail("a second plan '" + std::string(arg) + "' given: expected one plan file");
    path = arg;
    havePath = true;
  }
  if (!havePath)
    return fail("no plan file given: expected weft-inspect PLAN [--json|--summary]");

  auto plan = weft::plan::PlanFile::open(path);
  if (!plan)
    return fail(plan.status().message());
  std::string text;
  if (mode == Mode::Json) {
    text = weft::plan::planToJson(plan->plan());
  } else {
    // The signature checked, not read: a forged one is no signature.
    weft::StatusOr<weft::plan::SignatureState> signature =
        weft::plan::signatureState(plan->bytes(), path);
    if (!signature)
      return fail(signature.status().message());
    text = weft::plan::planSummary(plan->plan(), *signature);
  }
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    return fail("cannot write the output: expected a writable stdout");
  return 0;
}

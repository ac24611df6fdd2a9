// weft-tokenize: encodes text with a tokenizer.json as the runtime does
// (or decodes ids), for inspecting prompts and for timing the tokenizer.
#include "runtime/io/ReadFile.h"
#include "runtime/base/Text.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {
int fail(const std::string &msg) {
  std::cerr << "weft-tokenize: error: " << msg << "\n";
  return 1;
}
const char *kUsage =
    "usage: weft-tokenize TOKENIZER.json [--file TEXT_FILE] [--no-special] [--repeat N]\n"
    "                     [--count]        (encodes the file, or stdin; prints the ids)\n"
    "       weft-tokenize TOKENIZER.json --decode 1,2,3 [--skip-special]\n";
} // namespace

int main(int argc, char **argv) {
  std::string tokPath, file, decodeIds;
  bool special = true, count = false, skipSpecial = false;
  long repeat = 1;
  bool decoding = false;
  std::string encodeFlag; // the last flag given that only encoding uses
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--file" || a == "--no-special" || a == "--count" || a == "--repeat")
      encodeFlag = a;
    if (a == "--file") file = value();
    else if (a == "--no-special") special = false;
    else if (a == "--count") count = true;
    else if (a == "--skip-special") skipSpecial = true;
    else if (a == "--decode") decodeIds = value(), decoding = true;
    else if (a == "--repeat") {
      std::optional<int64_t> n = weft::parseInteger(value(), 1, 1000000);
      if (!n)
        return fail("--repeat: expected a positive integer");
      repeat = long(*n);
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (!a.empty() && a[0] != '-' && tokPath.empty()) tokPath = a;
    else return fail("unknown argument '" + a + "'\n" + kUsage);
  }
  if (tokPath.empty())
    return fail(std::string("no tokenizer given\n") + kUsage);
  if (decoding && !encodeFlag.empty())
    return fail(encodeFlag + " goes with encoding, not --decode");
  if (!decoding && skipSpecial)
    return fail("--skip-special goes with --decode");
  if (repeat > 1 && !count)
    return fail("--repeat times the encoder, and the time is printed with --count: add --count");
  if (decoding && decodeIds.empty())
    return fail("--decode: expected comma-separated ids");
  weft::StatusOr<weft::tokenizer::Tokenizer> tok = weft::tokenizer::Tokenizer::fromFile(tokPath);
  if (!tok.isOk())
    return fail(tok.status().message());
  if (decoding) {
    std::vector<int32_t> ids;
    std::stringstream ss(decodeIds);
    std::string item;
    while (std::getline(ss, item, ',')) {
      std::optional<int64_t> v = weft::parseInteger(item, 0, int64_t(tok->vocabSize()) - 1);
      if (!v)
        return fail("--decode: '" + item + "' is not an id of this tokenizer");
      ids.push_back(int32_t(*v));
    }
    std::cout << tok->decode(ids, skipSpecial) << "\n";
    return 0;
  }
  // A file or standard input, with the same cap.
  weft::StatusOr<std::string> input = file.empty()
                                          ? weft::io::readStandardInput(1u << 30, "the text")
                                          : weft::io::readRegularFile(file, 1u << 30, "the text");
  if (!input.isOk())
    return fail(input.status().message());
  std::string text = std::move(input.value());
  weft::StatusOr<std::vector<int32_t>> ids = tok->encode(text, special);
  if (!ids.isOk())
    return fail(ids.status().message());
  auto start = std::chrono::steady_clock::now();
  for (long r = 1; r < repeat; ++r)
    ids = tok->encode(text, special);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (count) {
    std::printf("%zu ids from %zu bytes", ids->size(), text.size());
    if (repeat > 1)
      std::printf("; %.6f s per encode (%ld runs after the first)", seconds / double(repeat - 1),
                  repeat - 1);
    std::printf("\n");
    return 0;
  }
  for (size_t i = 0; i < ids->size(); ++i)
    std::cout << (i ? "," : "") << (*ids)[i];
  std::cout << "\n";
  return 0;
}

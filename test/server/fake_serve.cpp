// weft-fake-serve (tests only): weft-serve's HTTP layer over the fake
// engine of the unit tests, with the byte-level fixture tokenizer and a
// chat template, for clients written in other languages (the official
// openai Python client). Prints the port, serves until stdin closes.
#include "runtime/server/Server.h"
#include "test/unit/FakeEngine.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: weft-fake-serve CHAT_TEMPLATE.jinja\n";
    return 1;
  }
  std::unique_ptr<weft::tokenizer::Tokenizer> tok = weft::testing::fixtureTokenizer();
  if (!tok)
    return 1;
  weft::testing::FakeEngine engine(tok->vocabSize(), weft::testing::letterTokens(*tok), 64, 8192,
                                   /*context 4096*/ 1024);
  std::ifstream f(argv[1]);
  std::stringstream ss;
  ss << f.rdbuf();
  weft::StatusOr<weft::chat::ChatTemplate> t = weft::chat::ChatTemplate::parse(ss.str(), argv[1]);
  if (!t.isOk()) {
    std::cerr << t.status().message() << "\n";
    return 1;
  }
  weft::server::ServerOptions o;
  o.port = 0;
  o.modelName = "fake";
  o.apiKey = "test-key";
  o.scheduler.prefixCaching = true; // as weft-serve runs
  weft::chat::LoadedChatTemplate loaded;
  loaded.chatTemplate.emplace(std::move(*t));
  o.chat = &loaded;
  weft::StatusOr<std::unique_ptr<weft::server::Server>> s =
      weft::server::Server::create(engine, tok.get(), o);
  if (!s.isOk() || !(*s)->start().isOk())
    return 1;
  std::printf("%d\n", (*s)->port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*s)->stop();
  return 0;
}

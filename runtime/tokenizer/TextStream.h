// Text of a generation as its tokens arrive: decoded incrementally (linear
// time over a long answer), a character split across tokens held back until
// its last byte, and cut at the first stop string. The server's streamed
// answers and weft-run's terminal output both read it.
#ifndef WEFT_RUNTIME_TOKENIZER_TEXTSTREAM_H_
#define WEFT_RUNTIME_TOKENIZER_TEXTSTREAM_H_

#include "runtime/tokenizer/Tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::tokenizer {

// Bytes at the end of `s` that start a UTF-8 character not yet complete.
size_t incompleteUtf8Tail(const std::string &s);

// One generation's text so far. Append tokens to `tokens`, call
// updateText, then send text[sent, ready) and set sent = ready.
struct TextState {
  std::vector<int32_t> tokens; // every token heard
  size_t prefix = 0, read = 0; // decoded: tokens[0, read); context from prefix
  std::string text;            // cut at the first stop string
  size_t searched = 0;         // text before this has no stop string start
  bool cut = false;            // a stop string was found: nothing more comes
  size_t sent = 0;             // what the caller has passed on
  size_t ready = 0;            // what may be passed on: complete characters,
                               // and not what might start a stop string
};

// Decodes the tokens since the last update (with a few before them, since a
// tokenizer may spell a token differently at the start of a text) and finds
// stop strings. `ended`: no more tokens come, so everything is ready.
void updateText(const Tokenizer *tok, const std::vector<std::string> &stops, bool ended,
                TextState &t);

} // namespace weft::tokenizer

#endif // WEFT_RUNTIME_TOKENIZER_TEXTSTREAM_H_

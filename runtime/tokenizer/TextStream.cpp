// Incremental decoding of a generation's text (see TextStream.h).
#include "runtime/tokenizer/TextStream.h"

#include <algorithm>

namespace weft::tokenizer {

size_t incompleteUtf8Tail(const std::string &s) {
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80)
      continue; // a continuation byte: look further back
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

namespace {

std::string decodeRange(const Tokenizer &tok, const std::vector<int32_t> &tokens,
                        size_t from, size_t to) {
  return tok.decode(std::vector<int32_t>(tokens.begin() + long(from), tokens.begin() + long(to)),
                    /*skipSpecial=*/true);
}

} // namespace

void updateText(const Tokenizer *tok, const std::vector<std::string> &stops,
                bool ended, TextState &t) {
  if (!tok || t.cut)
    return;
  if (t.read < t.tokens.size()) {
    std::string before = decodeRange(*tok, t.tokens, t.prefix, t.read);
    std::string after = decodeRange(*tok, t.tokens, t.prefix, t.tokens.size());
    if (after.compare(0, before.size(), before) != 0) {
      // The new tokens respelled the old ones: decode everything again.
      t.text = tok->decode(t.tokens, true);
      t.prefix = t.read = t.tokens.size();
      t.searched = 0;
    } else {
      std::string added = after.substr(before.size());
      // A character split across tokens waits for its last byte.
      if (ended || incompleteUtf8Tail(added) == 0) {
        t.text += added;
        t.prefix = t.read;
        t.read = t.tokens.size();
      }
    }
  }
  size_t longest = 0;
  size_t cut = std::string::npos;
  for (const std::string &stop : stops) {
    longest = std::max(longest, stop.size());
    size_t at = t.text.find(stop, t.searched);
    if (at != std::string::npos)
      cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    t.text.resize(cut);
    t.ready = cut;
    t.cut = true;
    return;
  }
  size_t ready = t.text.size();
  if (!ended) {
    ready -= incompleteUtf8Tail(t.text);
    ready = longest > 1 && ready >= longest - 1 ? ready - (longest - 1) : (longest > 1 ? 0 : ready);
  }
  t.searched = longest > 1 && t.text.size() >= longest - 1 ? t.text.size() - (longest - 1) : 0;
  t.ready = std::max(ready, t.sent);
}

} // namespace weft::tokenizer

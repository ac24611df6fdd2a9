// BPE tokenization from tokenizer.json.
#include "runtime/tokenizer/Tokenizer.h"

#include "runtime/io/ReadFile.h"
#include "runtime/base/Text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <map>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>

namespace weft::tokenizer {
namespace {

using Json = nlohmann::json;

const char *const kReplacementChar = "\xEF\xBF\xBD"; // U+FFFD

// GPT-2's pre-tokenization pattern (ByteLevel with use_regex).
const char *const kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length of the UTF-8 sequence at s[i] if it is valid, else 0; `prefix`
// gets how many bytes form the longest valid start of a sequence (the
// bytes one U+FFFD replaces, as Rust's from_utf8_lossy does).
size_t utf8Length(std::string_view s, size_t i, size_t &prefix) {
  auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  uint8_t c = b(0);
  prefix = 1;
  if (c < 0x80)
    return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size())
      return 0;
    uint8_t x = b(k);
    bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok)
      return 0;
    prefix = k + 1;
  }
  return n;
}

// Invalid UTF-8 replaced by U+FFFD.
std::string lossyUtf8(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t prefix = 1, n = utf8Length(s, i, prefix);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += kReplacementChar;
      i += prefix;
    }
  }
  return out;
}

bool validUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t prefix, n = utf8Length(s, i, prefix);
    if (!n)
      return false;
    i += n;
  }
  return true;
}

// The characters of a UTF-8 string (each as its bytes).
std::vector<std::string> chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t prefix, n = utf8Length(s, i, prefix);
    if (!n)
      n = 1;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// One pass into a new string: replacing in place would move the tail at
// every match (a megabyte of spaces took minutes).
void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  if (from.empty() || s.find(from) == std::string::npos)
    return;
  std::string out;
  out.reserve(s.size());
  size_t start = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, start)) {
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
  }
  out.append(s, start, std::string::npos);
  s.swap(out);
}

// A compiled PCRE2 pattern (UTF, Unicode properties).
class Regex {
public:
  static StatusOr<std::shared_ptr<Regex>> compile(const std::string &pattern,
                                                  const std::string &where) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                     pattern.size(), PCRE2_UTF | PCRE2_UCP, &error, &offset,
                                     nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return invalidArgument(where + ": regex does not compile at offset " +
                             std::to_string(offset) + ": " +
                             reinterpret_cast<const char *>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // optional speed-up
    auto r = std::make_shared<Regex>();
    r->code_ = code;
    return r;
  }
  ~Regex() {
    if (code_)
      pcre2_code_free(code_);
  }

  // [begin, end) of every non-empty match, in order.
  std::vector<std::pair<size_t, size_t>> matches(std::string_view s) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t at = 0;
    while (at <= s.size()) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at,
                           PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0)
        break;
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      size_t b = ov[0], e = ov[1];
      if (e > b)
        out.emplace_back(b, e);
      if (e == b) { // empty match: step one character
        size_t prefix, n = b < s.size() ? utf8Length(s, b, prefix) : 1;
        at = e + (n ? n : 1);
      } else {
        at = e;
      }
    }
    pcre2_match_data_free(md);
    return out;
  }

private:
  pcre2_code *code_ = nullptr;
};

struct Normalizer {
  enum Kind { Prepend, Replace, Unicode, Lowercase } kind;
  std::string a, b;
  int unicodeForm = 0; // Unicode: utf8proc options (NFC, NFD, NFKC, NFKD)
};

struct PreTokenizer {
  enum Kind { Split, ByteLevel, Metaspace } kind;
  std::shared_ptr<Regex> regex;  // Split (regex), ByteLevel with use_regex
  std::string literal;           // Split on a string
  bool removed = false;          // Split: drop the matches
  bool addPrefixSpace = false;   // ByteLevel
  std::string replacement;       // Metaspace
  std::string prependScheme;     // Metaspace: always, first, never
  bool split = true;             // Metaspace
};

struct DecoderStep {
  enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
  std::string a, b;      // Replace: pattern, content; Strip: content
  size_t start = 0, stop = 0;
  std::string replacement, prependScheme;
};

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;
  // Hugging Face's flags: the match swallows whitespace on its left /
  // right; it must not touch a word character on either side; it is
  // matched in the normalized text rather than the raw one.
  bool lstrip = false, rstrip = false, singleWord = false, normalized = false;
};

// A trie of added tokens' bytes, for one-pass leftmost-longest matching.
struct AddedTrie {
  struct Node {
    std::map<unsigned char, int> next;
    int token = -1; // index into the tokenizer's `added`
  };
  std::vector<Node> nodes = std::vector<Node>(1);
  void insert(const std::string &content, int index) {
    int node = 0;
    for (unsigned char c : content) {
      auto it = nodes[size_t(node)].next.find(c);
      if (it == nodes[size_t(node)].next.end()) {
        nodes.emplace_back();
        it = nodes[size_t(node)].next.emplace(c, int(nodes.size() - 1)).first;
      }
      node = it->second;
    }
    if (nodes[size_t(node)].token < 0) // longest first: the first of equals wins
      nodes[size_t(node)].token = index;
  }
  // The longest token starting at `at` (its index and length), or -1.
  int longest(std::string_view text, size_t at, size_t &length) const {
    int found = -1;
    for (int node = 0, i = 0; at + size_t(i) < text.size(); ++i) {
      auto child = nodes[size_t(node)].next.find(static_cast<unsigned char>(text[at + size_t(i)]));
      if (child == nodes[size_t(node)].next.end())
        break;
      node = child->second;
      if (nodes[size_t(node)].token >= 0) {
        found = nodes[size_t(node)].token;
        length = size_t(i) + 1;
      }
    }
    return found;
  }
  bool empty() const { return nodes[0].next.empty(); }
};

// The code point of the UTF-8 character at `at` (0 if invalid).
uint32_t codePointAt(std::string_view s, size_t at, size_t &length) {
  utf8proc_int32_t cp = 0;
  utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t *>(s.data() + at),
                                        utf8proc_ssize_t(s.size() - at), &cp);
  length = n > 0 ? size_t(n) : 1;
  return n > 0 ? uint32_t(cp) : 0;
}
// The code point of the UTF-8 character that ends at `end` (0 if none).
uint32_t codePointBefore(std::string_view s, size_t end, size_t &length) {
  size_t start = end;
  while (start > 0 && (static_cast<unsigned char>(s[start - 1]) & 0xC0) == 0x80)
    --start;
  if (start == 0 && end == 0)
    return length = 0, 0;
  if (start > 0)
    --start;
  return codePointAt(s, start, length);
}
// Rust's char::is_whitespace (Unicode White_Space).
bool isWhitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}
// What Hugging Face's single_word check counts as part of a word.
bool isWordChar(uint32_t c) {
  if (c == '_')
    return true;
  utf8proc_category_t cat = utf8proc_category(utf8proc_int32_t(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// Byte-level BPE's byte <-> printable character tables (GPT-2's).
struct ByteTables {
  std::array<std::string, 256> encode;
  std::unordered_map<std::string, uint8_t> decode;
  ByteTables() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + n++);
      encode[size_t(b)] = utf8(cp);
      decode[encode[size_t(b)]] = uint8_t(b);
    }
  }
};

const ByteTables &byteTables() {
  static const ByteTables t;
  return t;
}

} // namespace

struct Tokenizer::Impl {
  std::string name;
  int64_t idLimit = INT32_MAX; // ids at or above are refused (set from the entry count)
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> tokens; // by id ("" for holes)
  std::unordered_map<std::string, int> mergeRank; // "a\x01b" -> rank
  // Words already merged (encode runs on many threads of a server).
  static constexpr size_t kCachedWordBytes = 256, kCacheWords = 1 << 16;
  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
  bool ignoreMerges = false, byteFallback = false, fuseUnk = false;
  int32_t unkId = -1;
  std::vector<AddedToken> added;
  // Added tokens matched in the raw text, and those matched after
  // normalization (Hugging Face's `normalized` flag).
  AddedTrie rawTrie, normalizedTrie;

  // Splits `text` at the added tokens of `trie`, leftmost-longest as
  // Hugging Face does, applying each token's flags; calls piece(text
  // between tokens) and token(id) in order.
  template <typename Piece, typename Token>
  Status splitOnAdded(const AddedTrie &trie, std::string_view text, Piece piece,
                      Token token) const {
    size_t start = 0, at = 0;
    while (at < text.size()) {
      size_t length = 0;
      int k = trie.empty() ? -1 : trie.longest(text, at, length);
      if (k < 0) {
        ++at;
        continue;
      }
      const AddedToken &a = added[size_t(k)];
      size_t from = at, to = at + length, n = 0;
      if (a.singleWord) {
        bool before = from > 0 && isWordChar(codePointBefore(text, from, n));
        bool after = to < text.size() && isWordChar(codePointAt(text, to, n));
        if (before || after) {
          at = to; // not a match; the scan goes on after it
          continue;
        }
      }
      if (a.lstrip)
        while (from > start && isWhitespace(codePointBefore(text, from, n)) && n)
          from -= n;
      if (a.rstrip)
        while (to < text.size() && isWhitespace(codePointAt(text, to, n)))
          to += n;
      WEFT_RETURN_IF_ERROR(piece(text.substr(start, from - start)));
      token(a.id);
      start = at = to;
    }
    return piece(text.substr(start));
  }
  std::map<int32_t, size_t> addedById;
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> preTokenizers;
  std::vector<DecoderStep> decoders;
  // Post-processing: ids before and after the sequence.
  std::vector<int32_t> prefix, suffix;

  // One line whatever the file holds: the path may contain a token (any
  // bytes, newlines included), so it is escaped.
  Status bad(const std::string &path, const std::string &what) const {
    return invalidArgument(name + ": " + printableForMessage(path, 4096) + ": " +
                           printableForMessage(what, 4096));
  }

  // A "Sequence" part: `parse` on each element of j[key].
  template <typename Parse>
  Status sequence(const Json &j, const char *key, const std::string &path, Parse parse) {
    const Json &list = j.contains(key) ? j[key] : Json();
    if (!list.is_array())
      return bad(path + "." + key, "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      WEFT_RETURN_IF_ERROR(parse(list[i], path + "." + key + "[" + std::to_string(i) + "]"));
    return Status::ok();
  }

  // A Replace part's {"String": from} pattern and content.
  Status replacement(const Json &j, const std::string &path, std::string &from,
                     std::string &to) const {
    const Json &p = j.contains("pattern") ? j["pattern"] : Json();
    if (!p.is_object() || !p.contains("String") || !p["String"].is_string() ||
        !j.contains("content") || !j["content"].is_string())
      return bad(path, "Replace needs a {\"String\": ...} pattern and a content string");
    from = p["String"].get<std::string>();
    to = j["content"].get<std::string>();
    return Status::ok();
  }

  // A Metaspace step's replacement (exactly one character, as Hugging
  // Face's `char`: an empty one would never advance the word split) and
  // prepend scheme (always, first or never).
  Status metaspace(const Json &j, const std::string &path, std::string &replacement,
                   std::string &scheme) const {
    const Json &r = j.contains("replacement") ? j["replacement"] : Json("\xE2\x96\x81");
    if (!r.is_string())
      return bad(path + ".replacement", "expected a string of one character");
    replacement = r.get<std::string>();
    size_t prefix = 0;
    if (replacement.empty() || firstInvalidUtf8(replacement) != kAllValidUtf8 ||
        utf8Length(replacement, 0, prefix) != replacement.size())
      return bad(path + ".replacement", "'" + printableForMessage(replacement, 40) +
                                            "': expected exactly one character");
    if (j.contains("prepend_scheme")) {
      if (!j["prepend_scheme"].is_string())
        return bad(path + ".prepend_scheme", "expected always, first or never");
      scheme = j["prepend_scheme"].get<std::string>();
      if (scheme != "always" && scheme != "first" && scheme != "never")
        return bad(path + ".prepend_scheme",
                   "'" + printableForMessage(scheme, 40) + "': expected always, first or never");
    } else {
      const Json &add = j.contains("add_prefix_space") ? j["add_prefix_space"] : Json(true);
      if (!add.is_boolean())
        return bad(path + ".add_prefix_space", "expected true or false");
      scheme = add.get<bool>() ? "always" : "never";
    }
    return Status::ok();
  }

  Status parseNormalizer(const Json &j, const std::string &path) {
    if (j.is_null())
      return Status::ok();
    std::string type = j.value("type", "");
    if (type == "Sequence")
      return sequence(j, "normalizers", path, [&](const Json &x, const std::string &at) {
        return parseNormalizer(x, at);
      });
    static const std::map<std::string, int> forms = {
        {"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
        {"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
        {"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
        {"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
    if (auto form = forms.find(type); form != forms.end()) {
      Normalizer n{Normalizer::Unicode, "", "", form->second};
      normalizers.push_back(std::move(n));
      return Status::ok();
    }
    if (type == "Lowercase") {
      normalizers.push_back({Normalizer::Lowercase, "", "", 0});
      return Status::ok();
    }
    if (type == "Prepend") {
      if (!j.contains("prepend") || !j["prepend"].is_string())
        return bad(path + ".prepend", "expected a string");
      normalizers.push_back({Normalizer::Prepend, j["prepend"].get<std::string>(), "", 0});
      return Status::ok();
    }
    if (type == "Replace") {
      Normalizer n{Normalizer::Replace, "", "", 0};
      WEFT_RETURN_IF_ERROR(replacement(j, path, n.a, n.b));
      normalizers.push_back(std::move(n));
      return Status::ok();
    }
    return bad(path + ".type", "normalizer '" + type + "' is not supported");
  }

  Status parsePreTokenizer(const Json &j, const std::string &path) {
    if (j.is_null())
      return Status::ok();
    std::string type = j.value("type", "");
    if (type == "Sequence")
      return sequence(j, "pretokenizers", path, [&](const Json &x, const std::string &at) {
        return parsePreTokenizer(x, at);
      });
    PreTokenizer p{};
    if (type == "Split") {
      p.kind = PreTokenizer::Split;
      const Json &pattern = j.contains("pattern") ? j["pattern"] : Json();
      if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
        StatusOr<std::shared_ptr<Regex>> r =
            Regex::compile(pattern["Regex"].get<std::string>(), name + ": " + path + ".pattern");
        if (!r.isOk())
          return r.status();
        p.regex = *r;
      } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
        p.literal = pattern["String"].get<std::string>();
        if (p.literal.empty())
          return bad(path + ".pattern", "empty split string");
      } else {
        return bad(path + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
      }
      std::string behavior = j.value("behavior", "Isolated");
      if (behavior != "Isolated" && behavior != "Removed")
        return bad(path + ".behavior", "'" + behavior + "' is not supported (Isolated, Removed)");
      p.removed = behavior == "Removed";
      if (j.value("invert", false))
        return bad(path + ".invert", "inverted splits are not supported");
    } else if (type == "ByteLevel") {
      p.kind = PreTokenizer::ByteLevel;
      p.addPrefixSpace = j.value("add_prefix_space", false);
      if (j.value("use_regex", true)) {
        StatusOr<std::shared_ptr<Regex>> r = Regex::compile(kByteLevelPattern, name + ": " + path);
        if (!r.isOk())
          return r.status();
        p.regex = *r;
      }
    } else if (type == "Digits") {
      // Digits (Unicode N: Rust's char::is_numeric) isolated from the rest,
      // one by one or in runs.
      p.kind = PreTokenizer::Split;
      StatusOr<std::shared_ptr<Regex>> r = Regex::compile(
          j.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+", name + ": " + path);
      if (!r.isOk())
        return r.status();
      p.regex = *r;
    } else if (type == "Metaspace") {
      p.kind = PreTokenizer::Metaspace;
      WEFT_RETURN_IF_ERROR(metaspace(j, path, p.replacement, p.prependScheme));
      p.split = j.value("split", true);
    } else {
      return bad(path + ".type", "pre-tokenizer '" + type + "' is not supported");
    }
    preTokenizers.push_back(std::move(p));
    return Status::ok();
  }

  Status parseDecoder(const Json &j, const std::string &path) {
    if (j.is_null())
      return Status::ok();
    std::string type = j.value("type", "");
    if (type == "Sequence")
      return sequence(j, "decoders", path, [&](const Json &x, const std::string &at) {
        return parseDecoder(x, at);
      });
    DecoderStep d{};
    if (type == "ByteLevel") {
      d.kind = DecoderStep::ByteLevel;
    } else if (type == "Replace") {
      d.kind = DecoderStep::Replace;
      WEFT_RETURN_IF_ERROR(replacement(j, path, d.a, d.b));
    } else if (type == "ByteFallback") {
      d.kind = DecoderStep::ByteFallback;
    } else if (type == "Fuse") {
      d.kind = DecoderStep::Fuse;
    } else if (type == "Strip") {
      d.kind = DecoderStep::Strip;
      d.a = j.value("content", " ");
      d.start = j.value("start", size_t(0));
      d.stop = j.value("stop", size_t(0));
    } else if (type == "Metaspace") {
      d.kind = DecoderStep::Metaspace;
      WEFT_RETURN_IF_ERROR(metaspace(j, path, d.replacement, d.prependScheme));
    } else {
      return bad(path + ".type", "decoder '" + type + "' is not supported");
    }
    decoders.push_back(std::move(d));
    return Status::ok();
  }

  Status parsePostProcessor(const Json &j, const std::string &path) {
    if (j.is_null())
      return Status::ok();
    std::string type = j.value("type", "");
    if (type == "Sequence")
      return sequence(j, "processors", path, [&](const Json &x, const std::string &at) {
        return parsePostProcessor(x, at);
      });
    if (type == "ByteLevel")
      return Status::ok(); // offsets only
    if (type != "TemplateProcessing")
      return bad(path + ".type", "post-processor '" + type + "' is not supported");
    const Json &single = j.contains("single") ? j["single"] : Json();
    const Json &specials = j.contains("special_tokens") ? j["special_tokens"] : Json::object();
    if (!single.is_array())
      return bad(path + ".single", "expected an array");
    bool seenSequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const Json &item = single[i];
      std::string at = path + ".single[" + std::to_string(i) + "]";
      if (item.contains("Sequence")) {
        seenSequence = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id") ||
          !item["SpecialToken"]["id"].is_string())
        return bad(at, "expected a Sequence or a SpecialToken with an id");
      std::string key = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.contains(key) || !specials[key].contains("ids") ||
          !specials[key]["ids"].is_array())
        return bad(path + ".special_tokens", "no ids for '" + key + "'");
      for (const Json &id : specials[key]["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= idLimit)
          return bad(path + ".special_tokens." + key,
                     "expected integer ids in [0, " + std::to_string(idLimit) + ")");
        (seenSequence ? suffix : prefix).push_back(id.get<int32_t>());
      }
    }
    return Status::ok();
  }

  Status parseModel(const Json &m) {
    if (!m.is_object())
      return bad("model", "expected an object");
    std::string type = m.value("type", "BPE");
    if (type != "BPE")
      return bad("model.type", "'" + type + "' models are not supported (BPE only)");
    if (m.contains("continuing_subword_prefix") && !m["continuing_subword_prefix"].is_null() &&
        m["continuing_subword_prefix"] != "")
      return bad("model.continuing_subword_prefix", "not supported");
    if (m.contains("end_of_word_suffix") && !m["end_of_word_suffix"].is_null() &&
        m["end_of_word_suffix"] != "")
      return bad("model.end_of_word_suffix", "not supported");
    const Json &v = m.contains("vocab") ? m["vocab"] : Json();
    if (!v.is_object() || v.empty())
      return bad("model.vocab", "expected a non-empty object of token -> id");
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
          it.value().get<int64_t>() >= idLimit)
        return bad("model.vocab." + it.key(), "expected an integer id in [0, " +
                                                  std::to_string(idLimit) + ")");
      addToken(it.key(), it.value().get<int32_t>());
    }
    const Json &merges = m.contains("merges") ? m["merges"] : Json::array();
    if (!merges.is_array())
      return bad("model.merges", "expected an array");
    for (size_t i = 0; i < merges.size(); ++i) {
      const Json &x = merges[i];
      std::string a, b;
      if (x.is_string()) {
        std::string s = x.get<std::string>();
        size_t space = s.find(' ');
        if (space == std::string::npos)
          return bad("model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [a, b]");
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
        a = x[0].get<std::string>();
        b = x[1].get<std::string>();
      } else {
        return bad("model.merges[" + std::to_string(i) + "]", "expected \"a b\" or [a, b]");
      }
      mergeRank.emplace(a + '\x01' + b, int(i));
    }
    ignoreMerges = m.value("ignore_merges", false);
    byteFallback = m.value("byte_fallback", false);
    fuseUnk = m.value("fuse_unk", false);
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      auto it = vocab.find(m["unk_token"].get<std::string>());
      if (it == vocab.end())
        return bad("model.unk_token", "'" + m["unk_token"].get<std::string>() +
                                          "' is not in the vocabulary");
      unkId = it->second;
    }
    return Status::ok();
  }

  void addToken(const std::string &token, int32_t id) {
    vocab[token] = id;
    if (size_t(id) >= tokens.size())
      tokens.resize(size_t(id) + 1);
    tokens[size_t(id)] = token;
  }

  // BPE of one pre-token, appending ids. Merges come from a heap of the
  // adjacent pairs (lowest rank first, then leftmost, as Hugging Face's
  // BPE applies them) over a linked list of symbols: O(n log n) in the
  // word's length, where rescanning the word after every merge was
  // quadratic (a 30 kB prompt of a metaspace model is one word). Words seen
  // before come from a cache.
  Status bpe(const std::string &word, std::vector<int32_t> &out) const {
    if (ignoreMerges) {
      auto it = vocab.find(word);
      if (it != vocab.end()) {
        out.push_back(it->second);
        return Status::ok();
      }
    }
    bool cacheable = word.size() <= kCachedWordBytes;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cacheMutex);
      auto hit = cache.find(word);
      if (hit != cache.end()) {
        out.insert(out.end(), hit->second.begin(), hit->second.end());
        return Status::ok();
      }
    }
    std::vector<std::string> symbols = mergeWord(word);
    size_t before = out.size();
    WEFT_RETURN_IF_ERROR(emitSymbols(symbols, out));
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cacheMutex);
      if (cache.size() >= kCacheWords)
        cache.clear();
      cache.emplace(word, std::vector<int32_t>(out.begin() + long(before), out.end()));
    }
    return Status::ok();
  }

  std::vector<std::string> mergeWord(const std::string &word) const {
    std::vector<std::string> sym = chars(word);
    size_t n = sym.size();
    if (n < 2 || mergeRank.empty())
      return sym;
    std::vector<int> prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
      prev[i] = int(i) - 1;
      next[i] = i + 1 < n ? int(i + 1) : -1;
    }
    // (rank, left position, right position): a popped pair is applied only
    // if both symbols are still there and still adjacent, and unchanged
    // since it was pushed (their lengths say so).
    struct Pair {
      int rank, left, right;
      size_t leftLen, rightLen;
      bool operator>(const Pair &o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> heap;
    std::string key;
    auto push = [&](int l, int r) {
      if (l < 0 || r < 0)
        return;
      key.assign(sym[size_t(l)]);
      key += '\x01';
      key += sym[size_t(r)];
      auto it = mergeRank.find(key);
      if (it != mergeRank.end())
        heap.push({it->second, l, r, sym[size_t(l)].size(), sym[size_t(r)].size()});
    };
    for (size_t i = 0; i + 1 < n; ++i)
      push(int(i), int(i + 1));
    while (!heap.empty()) {
      Pair p = heap.top();
      heap.pop();
      if (sym[size_t(p.left)].size() != p.leftLen || sym[size_t(p.right)].size() != p.rightLen ||
          next[size_t(p.left)] != p.right || p.leftLen == 0)
        continue; // stale: one side was merged since
      sym[size_t(p.left)] += sym[size_t(p.right)];
      sym[size_t(p.right)].clear();
      int after = next[size_t(p.right)];
      next[size_t(p.left)] = after;
      if (after >= 0)
        prev[size_t(after)] = p.left;
      push(prev[size_t(p.left)], p.left);
      push(p.left, after);
    }
    std::vector<std::string> merged;
    for (int i = 0; i >= 0; i = next[size_t(i)])
      merged.push_back(std::move(sym[size_t(i)]));
    return merged;
  }

  // The ids of merged symbols: the vocabulary, else byte fallback, else the
  // unknown token.
  Status emitSymbols(const std::vector<std::string> &symbols, std::vector<int32_t> &out) const {
    bool lastUnk = false;
    for (const std::string &s : symbols) {
      auto it = vocab.find(s);
      if (it != vocab.end()) {
        out.push_back(it->second);
        lastUnk = false;
        continue;
      }
      if (byteFallback) {
        std::vector<int32_t> bytes;
        for (unsigned char c : s) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "<0x%02X>", c);
          auto b = vocab.find(hex);
          if (b == vocab.end())
            break;
          bytes.push_back(b->second);
        }
        if (bytes.size() == s.size()) {
          out.insert(out.end(), bytes.begin(), bytes.end());
          lastUnk = false;
          continue;
        }
      }
      if (unkId < 0)
        return invalidArgument(name + ": the vocabulary cannot express '" +
                               printableForMessage(lossyUtf8(s)) +
                               "' (no byte fallback and no unknown token)");
      if (!(fuseUnk && lastUnk))
        out.push_back(unkId);
      lastUnk = true;
    }
    return Status::ok();
  }

  // Pre-tokenization of one normalized segment into words.
  std::vector<std::string> preTokenize(std::string segment, bool firstSegment) const {
    std::vector<std::string> pieces = {std::move(segment)};
    for (const PreTokenizer &p : preTokenizers) {
      std::vector<std::string> next;
      for (std::string &piece : pieces) {
        switch (p.kind) {
        case PreTokenizer::Split: {
          std::vector<std::pair<size_t, size_t>> spans;
          if (p.regex) {
            spans = p.regex->matches(piece);
          } else {
            for (size_t at = piece.find(p.literal); at != std::string::npos;
                 at = piece.find(p.literal, at + p.literal.size()))
              spans.emplace_back(at, at + p.literal.size());
          }
          size_t last = 0;
          for (auto [b, e] : spans) {
            if (b > last)
              next.push_back(piece.substr(last, b - last));
            if (!p.removed)
              next.push_back(piece.substr(b, e - b));
            last = e;
          }
          if (last < piece.size())
            next.push_back(piece.substr(last));
          break;
        }
        case PreTokenizer::ByteLevel: {
          if (p.addPrefixSpace && (piece.empty() || piece[0] != ' '))
            piece.insert(piece.begin(), ' ');
          std::vector<std::string> parts;
          if (p.regex) {
            for (auto [b, e] : p.regex->matches(piece))
              parts.push_back(piece.substr(b, e - b));
          } else {
            parts.push_back(piece);
          }
          for (const std::string &part : parts) {
            std::string mapped;
            for (unsigned char c : part)
              mapped += byteTables().encode[c];
            if (!mapped.empty())
              next.push_back(std::move(mapped));
          }
          break;
        }
        case PreTokenizer::Metaspace: {
          replaceAll(piece, " ", p.replacement);
          bool prepend = p.prependScheme == "always" || (p.prependScheme == "first" && firstSegment);
          if (prepend && piece.compare(0, p.replacement.size(), p.replacement) != 0)
            piece.insert(0, p.replacement);
          if (!p.split) {
            next.push_back(piece);
            break;
          }
          // Each replacement character starts a word.
          size_t start = 0;
          for (size_t at = piece.find(p.replacement, 1); at != std::string::npos;
               at = piece.find(p.replacement, at + p.replacement.size())) {
            if (at > start)
              next.push_back(piece.substr(start, at - start));
            start = at;
          }
          if (start < piece.size())
            next.push_back(piece.substr(start));
          break;
        }
        }
      }
      pieces = std::move(next);
    }
    pieces.erase(std::remove(pieces.begin(), pieces.end(), std::string()), pieces.end());
    return pieces;
  }

  std::string normalize(std::string s) const {
    for (const Normalizer &n : normalizers) {
      if (s.empty())
        break;
      switch (n.kind) {
      case Normalizer::Prepend:
        s.insert(0, n.a);
        break;
      case Normalizer::Replace:
        replaceAll(s, n.a, n.b);
        break;
      case Normalizer::Unicode: {
        utf8proc_uint8_t *out = nullptr;
        utf8proc_ssize_t len =
            utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(s.data()),
                         utf8proc_ssize_t(s.size()), &out, utf8proc_option_t(n.unicodeForm));
        if (len >= 0)
          s.assign(reinterpret_cast<const char *>(out), size_t(len));
        std::free(out); // valid UTF-8 in (checked by encode), so len >= 0
        break;
      }
      case Normalizer::Lowercase: {
        std::string out;
        out.reserve(s.size());
        for (size_t i = 0; i < s.size();) {
          size_t len;
          uint32_t c = codePointAt(s, i, len);
          utf8proc_uint8_t buf[4];
          utf8proc_ssize_t n8 = utf8proc_encode_char(utf8proc_tolower(utf8proc_int32_t(c)), buf);
          out.append(reinterpret_cast<const char *>(buf), size_t(n8));
          i += len;
        }
        s.swap(out);
        break;
      }
      }
    }
    return s;
  }
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;
Tokenizer::~Tokenizer() = default;

StatusOr<Tokenizer> Tokenizer::fromJson(std::string_view json, const std::string &rawName) {
  const std::string name = printableForMessage(rawName, 4096); // one line, whatever the path
  if (json.size() > kMaxTokenizerBytes)
    return invalidArgument(name + ": " + std::to_string(json.size()) +
                           " bytes of tokenizer.json; at most " +
                           std::to_string(kMaxTokenizerBytes) + " are read");
  // Nesting bounds every recursive structure (Sequence normalizers,
  // pre-tokenizers, decoders) before anything recurses.
  WEFT_RETURN_IF_ERROR(io::checkJsonNesting(json, io::kMaxJsonDepth, name));
  // nlohmann's typed accessors throw on a field of the wrong type (a number
  // where a string belongs): that is bad input, reported as such.
  try {
    return parse(json, name);
  } catch (const nlohmann::json::exception &e) {
    return invalidArgument(name + ": unexpected field type: " + printableForMessage(e.what()));
  }
}

StatusOr<Tokenizer> Tokenizer::parse(std::string_view json, const std::string &name) {
  Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return invalidArgument(name + ": not valid JSON");
  if (!j.is_object())
    return invalidArgument(name + ": expected a JSON object (a tokenizer.json)");
  Tokenizer t;
  Impl &impl = *t.impl_;
  impl.name = name; // already one line (fromJson)
  const Json &added = j.contains("added_tokens") ? j["added_tokens"] : Json::array();
  // Ids index tables sized by the largest one: a vocabulary is dense, so an
  // id is refused beyond the number of tokens given plus 65,536.
  {
    size_t entries = added.is_array() ? added.size() : 0;
    if (j.contains("model") && j["model"].is_object() && j["model"].contains("vocab") &&
        j["model"]["vocab"].is_object())
      entries += j["model"]["vocab"].size();
    impl.idLimit = int64_t(std::min<size_t>(entries + 65536, size_t(INT32_MAX)));
  }
  WEFT_RETURN_IF_ERROR(impl.parseModel(j.contains("model") ? j["model"] : Json()));
  if (!added.is_array())
    return impl.bad("added_tokens", "expected an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const Json &a = added[i];
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string() || a["content"].get<std::string>().empty())
      return impl.bad("added_tokens[" + std::to_string(i) + "]",
                      "expected an integer id and a non-empty content");
    if (a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() >= impl.idLimit)
      return impl.bad("added_tokens[" + std::to_string(i) + "].id",
                      std::to_string(a["id"].get<int64_t>()) + ": expected an id in [0, " +
                          std::to_string(impl.idLimit) + ")");
    AddedToken tok{a["id"].get<int32_t>(), a["content"].get<std::string>(), a.value("special", false)};
    tok.lstrip = a.value("lstrip", false);
    tok.rstrip = a.value("rstrip", false);
    tok.singleWord = a.value("single_word", false);
    // Hugging Face's default: special tokens match the raw text, others
    // the normalized one.
    tok.normalized = a.value("normalized", !tok.special);
    if (tok.id < 0)
      return impl.bad("added_tokens[" + std::to_string(i) + "].id", "negative");
    impl.addToken(tok.content, tok.id);
    impl.addedById[tok.id] = impl.added.size();
    impl.added.push_back(tok);
  }
  // Longest first, so that at one position the longest token wins.
  std::stable_sort(impl.added.begin(), impl.added.end(),
                   [](const AddedToken &a, const AddedToken &b) {
                     return a.content.size() > b.content.size();
                   });
  impl.addedById.clear();
  for (size_t i = 0; i < impl.added.size(); ++i)
    impl.addedById[impl.added[i].id] = i;
  // Tries of the added tokens: the text is scanned once, not compared
  // with every added token at every byte.
  for (size_t i = 0; i < impl.added.size(); ++i)
    (impl.added[i].normalized ? impl.normalizedTrie : impl.rawTrie)
        .insert(impl.added[i].content, int(i));
  auto part = [&](const char *key) { return j.contains(key) ? j[key] : Json(); };
  WEFT_RETURN_IF_ERROR(impl.parseNormalizer(part("normalizer"), "normalizer"));
  WEFT_RETURN_IF_ERROR(impl.parsePreTokenizer(part("pre_tokenizer"), "pre_tokenizer"));
  WEFT_RETURN_IF_ERROR(impl.parsePostProcessor(part("post_processor"), "post_processor"));
  WEFT_RETURN_IF_ERROR(impl.parseDecoder(part("decoder"), "decoder"));
  for (int32_t id : impl.prefix)
    if (size_t(id) >= impl.tokens.size())
      return impl.bad("post_processor", "special id " + std::to_string(id) + " is not a token");
  for (int32_t id : impl.suffix)
    if (size_t(id) >= impl.tokens.size())
      return impl.bad("post_processor", "special id " + std::to_string(id) + " is not a token");
  return t;
}

StatusOr<Tokenizer> Tokenizer::fromFile(const std::string &path) {
  StatusOr<std::string> text = io::readRegularFile(path, kMaxTokenizerBytes, "tokenizer.json");
  if (!text.isOk())
    return text.status();
  return fromJson(*text, path);
}

StatusOr<LoadedTokenizer> loadTokenizer(const std::string &path, std::string_view embeddedJson,
                                        const std::string &embeddedName) {
  LoadedTokenizer out;
  if (!path.empty()) {
    StatusOr<Tokenizer> t = Tokenizer::fromFile(path);
    if (!t.isOk())
      return t.status();
    out.tokenizer.emplace(std::move(t.value()));
  } else if (!embeddedJson.empty()) {
    StatusOr<Tokenizer> t = Tokenizer::fromJson(embeddedJson, embeddedName);
    if (t.isOk())
      out.tokenizer.emplace(std::move(t.value()));
    else
      out.embeddedProblem = t.status();
  }
  return out;
}

StatusOr<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool addSpecial) const {
  const Impl &impl = *impl_;
  if (!validUtf8(text))
    return invalidArgument(impl.name + ": the text is not valid UTF-8");
  std::vector<int32_t> ids;
  if (addSpecial)
    ids = impl.prefix;
  // Added tokens of the raw text first; the text between them is
  // normalized, split at the normalized added tokens, pre-tokenized and run
  // through BPE.
  bool first = true;
  auto token = [&](int32_t id) {
    ids.push_back(id);
    first = false;
  };
  auto words = [&](std::string_view normalized) -> Status {
    if (normalized.empty())
      return Status::ok();
    for (const std::string &word : impl.preTokenize(std::string(normalized), first))
      WEFT_RETURN_IF_ERROR(impl.bpe(word, ids));
    first = false;
    return Status::ok();
  };
  auto plain = [&](std::string_view segment) -> Status {
    if (segment.empty())
      return Status::ok();
    std::string normalized = impl.normalize(std::string(segment));
    return impl.splitOnAdded(impl.normalizedTrie, normalized, words, token);
  };
  WEFT_RETURN_IF_ERROR(impl.splitOnAdded(impl.rawTrie, text, plain, token));
  if (addSpecial)
    ids.insert(ids.end(), impl.suffix.begin(), impl.suffix.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids, bool skipSpecial) const {
  const Impl &impl = *impl_;
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    auto added = impl.addedById.find(id);
    if (added != impl.addedById.end() && skipSpecial && impl.added[added->second].special)
      continue;
    if (id < 0 || size_t(id) >= impl.tokens.size() || impl.tokens[size_t(id)].empty())
      pieces.push_back(kReplacementChar);
    else
      pieces.push_back(impl.tokens[size_t(id)]);
  }
  for (const DecoderStep &d : impl.decoders) {
    switch (d.kind) {
    case DecoderStep::ByteLevel:
      for (std::string &p : pieces) {
        std::string bytes;
        for (const std::string &c : chars(p)) {
          auto it = byteTables().decode.find(c);
          if (it != byteTables().decode.end())
            bytes += char(it->second);
          else
            bytes += c;
        }
        p = std::move(bytes);
      }
      pieces = {lossyUtf8([&] {
        std::string all;
        for (const std::string &p : pieces)
          all += p;
        return all;
      }())};
      break;
    case DecoderStep::Replace:
      for (std::string &p : pieces)
        replaceAll(p, d.a, d.b);
      break;
    case DecoderStep::ByteFallback: {
      std::vector<std::string> next;
      std::string bytes;
      size_t count = 0;
      auto flush = [&] {
        if (!count)
          return;
        if (validUtf8(bytes))
          next.push_back(bytes);
        else
          for (size_t i = 0; i < count; ++i)
            next.push_back(kReplacementChar);
        bytes.clear();
        count = 0;
      };
      for (const std::string &p : pieces) {
        unsigned value = 0;
        if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' &&
            std::sscanf(p.c_str() + 3, "%2X", &value) == 1 && std::isxdigit(p[3]) &&
            std::isxdigit(p[4])) {
          bytes += char(value);
          ++count;
          continue;
        }
        flush();
        next.push_back(p);
      }
      flush();
      pieces = std::move(next);
      break;
    }
    case DecoderStep::Fuse: {
      std::string all;
      for (const std::string &p : pieces)
        all += p;
      pieces = {all};
      break;
    }
    case DecoderStep::Strip:
      for (std::string &p : pieces) {
        std::vector<std::string> cs = chars(p);
        size_t b = 0, e = cs.size();
        while (b < d.start && b < e && cs[b] == d.a)
          ++b;
        for (size_t k = 0; k < d.stop && e > b && cs[e - 1] == d.a; ++k)
          --e;
        std::string s;
        for (size_t i = b; i < e; ++i)
          s += cs[i];
        p = std::move(s);
      }
      break;
    case DecoderStep::Metaspace:
      for (size_t i = 0; i < pieces.size(); ++i) {
        replaceAll(pieces[i], d.replacement, " ");
        if (i == 0 && d.prependScheme != "never" && !pieces[i].empty() && pieces[i][0] == ' ')
          pieces[i].erase(0, 1);
      }
      break;
    }
  }
  std::string out;
  for (const std::string &p : pieces)
    out += p;
  return lossyUtf8(out);
}

int32_t Tokenizer::vocabSize() const { return int32_t(impl_->tokens.size()); }

int32_t Tokenizer::tokenId(std::string_view token) const {
  auto it = impl_->vocab.find(std::string(token));
  return it == impl_->vocab.end() ? -1 : it->second;
}

} // namespace weft::tokenizer

// The tokenizer against what Hugging Face's `tokenizers` library computes
// (test/fixtures/tokenizers/*/cases.json, written by generate.py there) for
// three BPE styles, and its one-line errors for tokenizer.json it cannot
// use.
#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace weft::tokenizer {
namespace {

std::string dir(const std::string &name) {
  return std::string(WEFT_FIXTURES_DIR) + "/tokenizers/" + name;
}

class TokenizerFixture : public ::testing::TestWithParam<const char *> {};

TEST_P(TokenizerFixture, MatchesHuggingFaceTokenizers) {
  StatusOr<Tokenizer> t = Tokenizer::fromFile(dir(GetParam()) + "/tokenizer.json");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  std::ifstream f(dir(GetParam()) + "/cases.json");
  nlohmann::json cases = nlohmann::json::parse(f);
  EXPECT_EQ(t->vocabSize(), cases["vocab_size"].get<int32_t>());
  ASSERT_GT(cases["cases"].size(), 10u);
  for (const nlohmann::json &c : cases["cases"]) {
    std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    StatusOr<std::vector<int32_t>> ids = t->encode(text, true);
    ASSERT_TRUE(ids.isOk()) << ids.status().message();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    StatusOr<std::vector<int32_t>> plain = t->encode(text, false);
    ASSERT_TRUE(plain.isOk()) << plain.status().message();
    EXPECT_EQ(*plain, c["ids_no_special"].get<std::vector<int32_t>>());
    std::vector<int32_t> expected = c["ids"];
    EXPECT_EQ(t->decode(expected, false), c["decoded"].get<std::string>());
    EXPECT_EQ(t->decode(expected, true), c["decoded_skip_special"].get<std::string>());
  }
}

// A server tokenizes whatever a client sends: encoding N bytes takes time
// linear in N for every style, also for one pre-token of a megabyte (the
// metaspace style has no pre-tokenizer; a run of one character is one
// regex match), for long runs of spaces (the metaspace normalizer) and for
// text full of added tokens' first characters. Each takes 0.1-0.4 s on
// this project's 2-core machines; the quadratic merge loop, in-place
// replacement and per-token added-token scan this replaced needed minutes.
// The bound is 10 s, far from both, so a loaded machine (sanitizers, other
// jobs) does not fail it while a quadratic path still does; the speed
// itself is a benchmark's business.
TEST_P(TokenizerFixture, EncodesAMegabyteInLinearTime) {
  StatusOr<Tokenizer> t = Tokenizer::fromFile(dir(GetParam()) + "/tokenizer.json");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  std::string random;
  uint64_t state = 12345;
  const char *pieces[] = {"a", "b", "e", " ", "the ", "ing", "\n", "é", "日本", "🙂", "<", "<|", "12"};
  while (random.size() < (1u << 20)) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    random += pieces[(state >> 33) % (sizeof(pieces) / sizeof(pieces[0]))];
  }
  const std::pair<const char *, std::string> inputs[] = {
      {"one letter", std::string(1u << 20, 'a')},
      {"spaces", std::string(1u << 20, ' ')},
      {"'<' runs", std::string(1u << 20, '<')},
      {"random", random},
  };
  for (const auto &[what, text] : inputs) {
    auto start = std::chrono::steady_clock::now();
    StatusOr<std::vector<int32_t>> ids = t->encode(text, false);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(ids.isOk()) << what << ": " << ids.status().message();
    EXPECT_FALSE(ids->empty()) << what;
    EXPECT_LT(seconds, 10.0) << what << " (" << GetParam() << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Styles, TokenizerFixture,
                         ::testing::Values("byte_level_regex", "byte_level", "metaspace_fallback",
                                           "byte_level_digits", "metaspace_chat"));

// A one-line error naming the file and the JSON path.
void expectError(const std::string &json, const std::string &expected) {
  StatusOr<Tokenizer> t = Tokenizer::fromJson(json, "tok.json");
  ASSERT_FALSE(t.isOk()) << "accepted: " << json;
  EXPECT_EQ(t.status().message(), expected);
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
}

TEST(Tokenizer, RejectsWhatItCannotUse) {
  expectError("{", "tok.json: not valid JSON");
  expectError("[1]", "tok.json: expected a JSON object (a tokenizer.json)");
  expectError(R"({"model": {"type": "Unigram", "vocab": []}})",
              "tok.json: model.type: 'Unigram' models are not supported (BPE only)");
  expectError(R"({"model": {"type": "BPE", "vocab": {}}})",
              "tok.json: model.vocab: expected a non-empty object of token -> id");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": -1}}})",
              "tok.json: model.vocab.a: expected an integer id in [0, 65537)");
  // Ids index tables sized by the largest: far beyond the entries given
  // (near 2^31, or past 2^32 where a cast would wrap) is refused at once.
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 2147483600}}})",
              "tok.json: model.vocab.a: expected an integer id in [0, 65537)");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "added_tokens": [{"id": 4294967297, "content": "<x>"}]})",
              "tok.json: added_tokens[0].id: 4294967297: expected an id in [0, 65538)");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "post_processor": {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}],
                    "special_tokens": {"<s>": {"ids": [100000000]}}}})",
              "tok.json: post_processor.special_tokens.<s>: expected integer ids in [0, 65537)");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})",
              "tok.json: model.merges[0]: expected \"a b\" or [a, b]");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "unk_token": "<unk>"}})",
              "tok.json: model.unk_token: '<unk>' is not in the vocabulary");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"}]}})",
              "tok.json: pre_tokenizer.pretokenizers[0].pattern: regex does not compile at "
              "offset 2: missing terminating ] for character class");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "normalizer": {"type": "Precompiled"}})",
              "tok.json: normalizer.type: normalizer 'Precompiled' is not supported");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "decoder": {"type": "WordPiece"}})",
              "tok.json: decoder.type: decoder 'WordPiece' is not supported");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "post_processor": {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}],
                    "special_tokens": {}}})",
              "tok.json: post_processor.special_tokens: no ids for '<s>'");
  StatusOr<Tokenizer> typed = Tokenizer::fromJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "decoder": {"type": 7}})", "tok.json");
  ASSERT_FALSE(typed.isOk());
  EXPECT_EQ(typed.status().message().rfind("tok.json: unexpected field type: ", 0), 0u)
      << typed.status().message();
}

// Metaspace's replacement is one character, as Hugging Face's `char`: an
// empty one once made the word split loop forever on the first encode (a
// tokenizer.json from a checkpoint, packed into plans by weft-compile).
TEST(Tokenizer, MetaspaceTakesOneCharacterAndAKnownScheme) {
  auto withPre = [](const std::string &pre) {
    return R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": )" + pre + "}";
  };
  expectError(withPre(R"({"type": "Metaspace", "replacement": ""})"),
              "tok.json: pre_tokenizer.replacement: '': expected exactly one character");
  expectError(withPre(R"({"type": "Sequence", "pretokenizers": [
                           {"type": "Metaspace", "replacement": "ab"}]})"),
              "tok.json: pre_tokenizer.pretokenizers[0].replacement: 'ab': expected exactly one "
              "character");
  expectError(withPre(R"({"type": "Metaspace", "replacement": 7})"),
              "tok.json: pre_tokenizer.replacement: expected a string of one character");
  expectError(withPre(R"({"type": "Metaspace", "prepend_scheme": "sometimes"})"),
              "tok.json: pre_tokenizer.prepend_scheme: 'sometimes': expected always, first or "
              "never");
  expectError(withPre(R"({"type": "Metaspace", "add_prefix_space": "yes"})"),
              "tok.json: pre_tokenizer.add_prefix_space: expected true or false");
  expectError(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                  "decoder": {"type": "Metaspace", "replacement": ""}})",
              "tok.json: decoder.replacement: '': expected exactly one character");
  // One character of any width is fine: the default U+2581, or '_'.
  for (const char *r : {"\\u2581", "_", "\\ud83d\\ude42"}) {
    StatusOr<Tokenizer> t = Tokenizer::fromJson(
        std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "<unk>": 1},
                                  "unk_token": "<unk>"},
                        "pre_tokenizer": {"type": "Metaspace", "replacement": ")") +
            r + "\"}}",
        "tok.json");
    ASSERT_TRUE(t.isOk()) << r << ": " << t.status().message();
    StatusOr<std::vector<int>> ids = t->encode("a a a");
    ASSERT_TRUE(ids.isOk()) << ids.status().message();
    EXPECT_FALSE(ids->empty());
  }
}

TEST(Tokenizer, ErrorsAreOneLineWhateverTheTokens) {
  // Found by weft-fuzz-tokenizer: a token with a newline in a field path
  // made a two-line message. Paths and values are escaped.
  StatusOr<Tokenizer> t =
      Tokenizer::fromJson(R"({"model": {"type": "BPE", "vocab": {"a\nb": -1}}})", "tok\n.json");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("model.vocab.a"), std::string::npos);
}

TEST(Tokenizer, DeepNestingIsRefusedBeforeParsing) {
  // A Sequence normalizer nested 100,000 levels deep: one line, at once,
  // without recursing into it.
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += R"({"type": "Sequence", "normalizers": [)";
  deep += R"({"type": "NFC"})";
  for (int i = 0; i < 100000; ++i)
    deep += "]}";
  std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": )" + deep + "}";
  auto start = std::chrono::steady_clock::now();
  StatusOr<Tokenizer> t = Tokenizer::fromJson(json, "deep.json");
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().message(), "deep.json: JSON nested 200002 levels deep; at most 64 are read");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(Tokenizer, TextOutsideTheVocabulary) {
  StatusOr<Tokenizer> t =
      Tokenizer::fromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}})", "tok.json");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  StatusOr<std::vector<int32_t>> ok = t->encode("abba");
  ASSERT_TRUE(ok.isOk());
  EXPECT_EQ(*ok, (std::vector<int32_t>{0, 1, 1, 0}));
  StatusOr<std::vector<int32_t>> bad = t->encode("abc");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(),
            "tok.json: the vocabulary cannot express 'c' (no byte fallback and no unknown token)");
  StatusOr<std::vector<int32_t>> invalid = t->encode("a\xff");
  ASSERT_FALSE(invalid.isOk());
  EXPECT_EQ(invalid.status().message(), "tok.json: the text is not valid UTF-8");
  EXPECT_EQ(t->decode({0, 7, 1}), "a\xEF\xBF\xBD" "b"); // unknown id: U+FFFD
}

} // namespace
} // namespace weft::tokenizer

namespace weft::tokenizer {
namespace {

TEST(Tokenizer, LoadedFromAFileOrThePlan) {
  std::string file = std::string(WEFT_FIXTURES_DIR) + "/tokenizers/byte_level_regex/tokenizer.json";
  std::ifstream in(file);
  std::stringstream json;
  json << in.rdbuf();
  // A file given wins; one that cannot be read is an error.
  StatusOr<LoadedTokenizer> fromFile = loadTokenizer(file, "not json", "plan");
  ASSERT_TRUE(fromFile.isOk()) << fromFile.status().message();
  EXPECT_TRUE(fromFile->tokenizer.has_value());
  EXPECT_TRUE(fromFile->embeddedProblem.isOk());
  EXPECT_FALSE(loadTokenizer(file + ".missing", json.str(), "plan").isOk());
  // The plan's: read, unreadable (a problem the caller weighs), or none.
  StatusOr<LoadedTokenizer> embedded = loadTokenizer("", json.str(), "plan");
  ASSERT_TRUE(embedded.isOk());
  EXPECT_TRUE(embedded->tokenizer.has_value());
  StatusOr<LoadedTokenizer> broken = loadTokenizer("", "{", "x.weft (tokenizer_json)");
  ASSERT_TRUE(broken.isOk());
  EXPECT_FALSE(broken->tokenizer.has_value());
  EXPECT_NE(broken->embeddedProblem.message().find("x.weft (tokenizer_json)"), std::string::npos);
  StatusOr<LoadedTokenizer> none = loadTokenizer("", "", "plan");
  ASSERT_TRUE(none.isOk());
  EXPECT_FALSE(none->tokenizer.has_value());
  EXPECT_TRUE(none->embeddedProblem.isOk());
}

} // namespace
} // namespace weft::tokenizer

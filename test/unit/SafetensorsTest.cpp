// Tests for the safetensors header and shard-index readers: valid files, the
// header-only read, and one case per validation rule.
#include "runtime/io/Safetensors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace weft;
using namespace weft::io;

namespace {

struct Spec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};

std::string u64le(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

std::string jsonShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

// One tensor entry, `"name":{...}`, for hand-written headers.
std::string entry(const std::string &name, const std::string &dtype,
                  const std::vector<int64_t> &shape, uint64_t begin, uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + jsonShape(shape) +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

// A header for `specs` laid out back to back; returns the data size too.
std::string headerFor(const std::vector<Spec> &specs, uint64_t &dataSize,
                      const std::string &metadataJson = "") {
  std::string json = "{";
  if (!metadataJson.empty())
    json += "\"__metadata__\":" + metadataJson;
  dataSize = 0;
  for (const Spec &s : specs) {
    uint64_t bytes = dtypeSize(*parseDType(s.dtype));
    for (int64_t d : s.shape)
      bytes *= static_cast<uint64_t>(d);
    if (json.size() > 1)
      json += ",";
    json += entry(s.name, s.dtype, s.shape, dataSize, dataSize + bytes);
    dataSize += bytes;
  }
  return json + "}";
}

std::string dataPattern(uint64_t size) {
  std::string data(size, '\0');
  for (uint64_t i = 0; i < size; ++i)
    data[i] = static_cast<char>((i * 31 + 7) & 0xFF);
  return data;
}

// Length prefix + header + data; the prefix may lie.
std::string fileBytes(const std::string &header, uint64_t dataSize,
                      std::optional<uint64_t> lengthPrefix = std::nullopt) {
  return u64le(lengthPrefix.value_or(header.size())) + header + dataPattern(dataSize);
}

class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "weft-safetensors-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << pattern;
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string path(const std::string &name) const { return dir_ + "/" + name; }

  std::string write(const std::string &name, const std::string &bytes) {
    std::string p = path(name);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << p;
    return p;
  }

  std::string dir_;
};

// The status code, the single line, the file name and the named culprit.
template <typename T>
void expectError(const StatusOr<T> &result, StatusCode code, const std::string &file,
                 const std::vector<std::string> &needles) {
  ASSERT_FALSE(result.isOk()) << "expected an error mentioning " << file;
  const std::string &m = result.status().message();
  EXPECT_EQ(result.status().code(), code)
      << "got " << statusCodeName(result.status().code()) << ": " << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.find('\r'), std::string::npos) << m;
  EXPECT_EQ(m.rfind(file + ": ", 0), 0u) << m;
  for (const std::string &needle : needles)
    EXPECT_NE(m.find(needle), std::string::npos) << "'" << needle << "' not in: " << m;
}

//===----------------------------------------------------------------------===//
// DType
//===----------------------------------------------------------------------===//

TEST(DTypeTest, NamesAndSizesRoundTrip) {
  const std::pair<DType, uint64_t> all[] = {
      {DType::F64, 8},     {DType::F32, 4},     {DType::F16, 2},  {DType::BF16, 2},
      {DType::F8_E4M3, 1}, {DType::F8_E5M2, 1}, {DType::I64, 8},  {DType::I32, 4},
      {DType::I16, 2},     {DType::I8, 1},      {DType::U8, 1},   {DType::BOOL, 1},
      {DType::U16, 2},     {DType::U32, 4},     {DType::U64, 8}};
  for (auto [dtype, size] : all) {
    EXPECT_EQ(parseDType(dtypeName(dtype)), dtype) << dtypeName(dtype);
    EXPECT_EQ(dtypeSize(dtype), size) << dtypeName(dtype);
  }
  EXPECT_STREQ(dtypeName(DType::F8_E4M3), "F8_E4M3");
  EXPECT_STREQ(dtypeName(DType::BF16), "BF16");
  EXPECT_FALSE(parseDType("f16"));
  EXPECT_FALSE(parseDType("F16 "));
  EXPECT_FALSE(parseDType(""));
}

//===----------------------------------------------------------------------===//
// Valid headers
//===----------------------------------------------------------------------===//

using SafetensorsTest = TempDirTest;

TEST_F(SafetensorsTest, ValidFileRoundTrips) {
  // Not in name order, so "file order" is observable.
  const std::vector<Spec> specs = {{"model.embed", "BF16", {16, 8}},
                                   {"a.scale", "F32", {}},
                                   {"model.norm.weight", "F16", {64}},
                                   {"lm_head", "F8_E4M3", {3, 5, 2}},
                                   {"mask", "BOOL", {7}},
                                   {"ids", "I64", {2, 2}}};
  uint64_t dataSize = 0;
  std::string header =
      headerFor(specs, dataSize, R"({"format":"pt","note":"caf\u00e9 \u2603"})");
  std::string bytes = fileBytes(header, dataSize);
  std::string p = write("model.safetensors", bytes);

  auto result = readSafetensorsHeader(p);
  ASSERT_TRUE(result.isOk()) << result.status().message();
  const SafetensorsHeader &h = *result;
  EXPECT_EQ(h.path, p);
  EXPECT_EQ(h.headerSize, header.size());
  EXPECT_EQ(h.fileSize, bytes.size());
  EXPECT_EQ(h.dataOffset(), 8 + header.size());
  EXPECT_EQ(h.dataSize(), dataSize);
  ASSERT_EQ(h.tensors.size(), specs.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorInfo &t = h.tensors[i];
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_STREQ(dtypeName(t.dtype), specs[i].dtype.c_str());
    EXPECT_EQ(t.shape, specs[i].shape);
    EXPECT_EQ(t.dataBegin, offset);
    EXPECT_EQ(t.dataEnd - t.dataBegin, t.numBytes());
    offset = t.dataEnd;
    EXPECT_EQ(h.find(specs[i].name), &t);
  }
  EXPECT_EQ(h.find("model.norm.weight")->numElements(), 64u);
  EXPECT_EQ(h.find("model.norm.weight")->numBytes(), 128u);
  EXPECT_EQ(h.find("a.scale")->numElements(), 1u); // rank 0 holds one element
  EXPECT_EQ(h.find("lm_head")->numBytes(), 30u);
  EXPECT_EQ(h.find("missing"), nullptr);
  EXPECT_EQ(h.find(""), nullptr);
  EXPECT_EQ(h.metadata.size(), 2u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  EXPECT_EQ(h.metadata.at("note"), "caf\xc3\xa9 \xe2\x98\x83");

  // The in-memory entry point agrees, given only the header bytes.
  auto parsed = parseSafetensorsHeader(std::string_view(bytes).substr(0, 8 + header.size()),
                                       bytes.size(), "mem");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->path, "mem");
  ASSERT_EQ(parsed->tensors.size(), specs.size());
  EXPECT_EQ(parsed->find("ids")->dataEnd, h.find("ids")->dataEnd);

  // A copy keeps a working index.
  SafetensorsHeader copy = h;
  EXPECT_EQ(copy.find("mask"), &copy.tensors[4]);
}

TEST_F(SafetensorsTest, RebuildIndexAfterEditing) {
  uint64_t dataSize = 0;
  std::string header = headerFor({{"x", "F32", {2}}}, dataSize);
  auto h = parseSafetensorsHeader(fileBytes(header, dataSize), 8 + header.size() + dataSize, "m");
  ASSERT_TRUE(h.isOk()) << h.status().message();
  h->tensors.push_back(TensorInfo{"y", DType::U8, {1}, 8, 9});
  h->rebuildIndex();
  EXPECT_EQ(h->find("y"), &h->tensors[1]);
  EXPECT_EQ(h->find("x"), &h->tensors[0]);
}

TEST_F(SafetensorsTest, EmptyHeaderObjectIsValid) {
  auto h = readSafetensorsHeader(write("empty.safetensors", fileBytes("{}", 0)));
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_TRUE(h->tensors.empty());
  EXPECT_TRUE(h->metadata.empty());
  EXPECT_EQ(h->dataSize(), 0u);
}

TEST_F(SafetensorsTest, ZeroSizeTensorsAreAllowed) {
  // Empty ranges may sit anywhere, even inside another tensor's bytes.
  std::string header = "{" + entry("w", "F32", {2, 2}, 0, 16) + "," +
                       entry("empty", "F16", {0, 4}, 4, 4) + "," +
                       entry("also_empty", "BF16", {1 << 20, 0}, 16, 16) + "}";
  auto h = readSafetensorsHeader(write("zero.safetensors", fileBytes(header, 16)));
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_EQ(h->find("empty")->numElements(), 0u);
  EXPECT_EQ(h->find("also_empty")->numBytes(), 0u);
}

TEST_F(SafetensorsTest, TrailingWhitespacePaddingIsAllowed) {
  uint64_t dataSize = 0;
  std::string header = headerFor({{"w", "F16", {4}}}, dataSize);
  for (const std::string &pad : {std::string("       "), std::string(" \n\t\r ")}) {
    auto h = readSafetensorsHeader(write("padded.safetensors", fileBytes(header + pad, dataSize)));
    ASSERT_TRUE(h.isOk()) << h.status().message();
    EXPECT_EQ(h->headerSize, header.size() + pad.size());
    EXPECT_EQ(h->find("w")->dataEnd, 8u);
  }
}

TEST_F(SafetensorsTest, GapsAndUnusedTrailingDataAreAllowed) {
  std::string header = "{" + entry("b", "U8", {4}, 8, 12) + "," + entry("a", "U8", {2}, 0, 2) + "}";
  auto h = readSafetensorsHeader(write("gaps.safetensors", fileBytes(header, 100)));
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_EQ(h->tensors[0].name, "b");
}

TEST_F(SafetensorsTest, NonAsciiTensorNames) {
  std::string header = "{" + entry("caf\xc3\xa9.\xf0\x9f\x90\x8d", "I8", {3}, 0, 3) + "}";
  auto h = readSafetensorsHeader(write("utf8.safetensors", fileBytes(header, 3)));
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_NE(h->find("caf\xc3\xa9.\xf0\x9f\x90\x8d"), nullptr);
}

TEST_F(SafetensorsTest, ReadsOnlyTheHeaderOfASparseTwoGiBFile) {
  uint64_t dataSize = 0;
  std::string header = headerFor({{"embed", "F32", {1 << 14, 1 << 14}},  // 1 GiB
                                  {"head", "BF16", {1 << 15, 1 << 14}}}, // 1 GiB
                                 dataSize);
  ASSERT_EQ(dataSize, 2ull << 30);
  std::string p = path("big.safetensors");
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::string prefix = u64le(header.size()) + header;
  ASSERT_EQ(::write(fd, prefix.data(), prefix.size()), static_cast<ssize_t>(prefix.size()));
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(prefix.size() + dataSize)), 0);
  ::close(fd);

  auto start = std::chrono::steady_clock::now();
  auto h = readSafetensorsHeader(p);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_EQ(h->fileSize, prefix.size() + dataSize);
  EXPECT_EQ(h->find("head")->dataEnd, dataSize);
  // Reading 2 GiB would take far longer than this even from page cache.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(), 2000);
}

//===----------------------------------------------------------------------===//
// Files and the length prefix
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, MissingFile) {
  std::string p = path("nope.safetensors");
  expectError(readSafetensorsHeader(p), StatusCode::kNotFound, p, {"cannot open"});
  std::string q = path("no/such/dir.safetensors");
  expectError(readSafetensorsHeader(q), StatusCode::kNotFound, q, {"cannot open"});
}

TEST_F(SafetensorsTest, DirectoryIsNotAFile) {
  expectError(readSafetensorsHeader(dir_), StatusCode::kInvalidArgument, dir_,
              {"is a directory"});
}

TEST_F(SafetensorsTest, FileShorterThanTheLengthPrefix) {
  std::string p = write("short.safetensors", std::string("\x02\0\0\0\0", 5));
  expectError(readSafetensorsHeader(p), StatusCode::kInvalidArgument, p,
              {"5 bytes", "at least 8"});
  std::string e = write("empty.safetensors", "");
  expectError(readSafetensorsHeader(e), StatusCode::kInvalidArgument, e, {"0 bytes"});
}

TEST_F(SafetensorsTest, LengthPrefixZero) {
  std::string p = write("zero.safetensors", fileBytes("{}", 8, 0));
  expectError(readSafetensorsHeader(p), StatusCode::kInvalidArgument, p,
              {"length prefix is 0"});
}

TEST_F(SafetensorsTest, LengthPrefixAboveCap) {
  uint64_t tooBig = kMaxSafetensorsHeaderSize + 1;
  std::string p = write("cap.safetensors", fileBytes("{}", 16, tooBig));
  expectError(readSafetensorsHeader(p), StatusCode::kInvalidArgument, p,
              {"length prefix is " + std::to_string(tooBig), "100 MiB"});
  // Random data (here: a text file) reads as an absurd length.
  std::string t = write("text.safetensors", "hello world, not a checkpoint");
  expectError(readSafetensorsHeader(t), StatusCode::kInvalidArgument, t, {"length prefix"});
}

TEST_F(SafetensorsTest, LengthPrefixBeyondTheFile) {
  std::string p = write("beyond.safetensors", fileBytes("{}", 0, 3));
  expectError(readSafetensorsHeader(p), StatusCode::kOutOfRange, p,
              {"length prefix is 3 bytes but only 2 follow"});
  std::string q = write("beyond2.safetensors", fileBytes("{}", 0, 1000));
  expectError(readSafetensorsHeader(q), StatusCode::kOutOfRange, q, {"1000"});
}

TEST_F(SafetensorsTest, InMemoryPrefixMustHoldTheHeader) {
  std::string bytes = fileBytes("{}", 100);
  expectError(parseSafetensorsHeader(std::string_view(bytes).substr(0, 5), bytes.size(), "m"),
              StatusCode::kInvalidArgument, "m", {"only 5 bytes"});
  expectError(parseSafetensorsHeader(std::string_view(bytes).substr(0, 9), bytes.size(), "m"),
              StatusCode::kInvalidArgument, "m", {"1 of the 2 header bytes"});
  expectError(parseSafetensorsHeader(bytes, 4, "m"), StatusCode::kInvalidArgument, "m",
              {"file of 4 bytes"});
}

TEST_F(SafetensorsTest, MessagesStayOnOneLineWithHostileNames) {
  // A tensor named "a\nb" (JSON escape) with a bad dtype, in a file whose
  // path holds a newline as well.
  std::string header = R"({"a\nb\u2028c":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})";
  std::string p = write("new\nline.safetensors", fileBytes(header, 1));
  auto h = readSafetensorsHeader(p);
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().code(), StatusCode::kUnimplemented);
  const std::string &m = h.status().message();
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_NE(m.find("new\\x0aline.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("'a\\x0ab\\xe2\\x80\\xa8c'"), std::string::npos) << m;
}

//===----------------------------------------------------------------------===//
// Malformed headers: one case per rule, through both entry points
//===----------------------------------------------------------------------===//

struct BadHeader {
  const char *label;
  std::string json;
  uint64_t dataSize;
  StatusCode code;
  std::vector<std::string> needles;
};

std::ostream &operator<<(std::ostream &os, const BadHeader &c) { return os << c.label; }

const StatusCode kBad = StatusCode::kInvalidArgument;
const StatusCode kRange = StatusCode::kOutOfRange;

std::string ones(int n) { // "1,1,...,1"
  std::string s = "1";
  for (int i = 1; i < n; ++i)
    s += ",1";
  return s;
}

std::string w16(const std::string &rest) { // tensor "w" with a field list
  return R"({"w":{)" + rest + "}}";
}

const std::vector<BadHeader> &badHeaders() {
  static const std::vector<BadHeader> cases = {
      // JSON syntax, shape of the document, UTF-8.
      {"Truncated", R"({"w":)", 0, kBad, {"not valid JSON", "at byte 5", "file offset 13"}},
      {"MissingColon", R"({"w" {}})", 0, kBad, {"not valid JSON", "at byte 5"}},
      {"SingleQuotes", "{'w':1}", 0, kBad, {"not valid JSON", "at byte 1"}},
      {"Comment", "{/*x*/}", 0, kBad, {"not valid JSON"}},
      {"NumberOverflow", R"({"w":{"dtype":"U8","shape":[1e999],"data_offsets":[0,1]}})", 1,
       kBad, {"not valid JSON", "1e999"}},
      {"TopLevelArray", "[]", 0, kBad, {"starts with '['", "JSON object"}},
      {"TopLevelString", R"("w")", 0, kBad, {"starts with '\"'", "JSON object"}},
      {"LeadingSpace", " {}", 0, kBad, {"starts with ' '"}},
      {"ByteOrderMark", "\xef\xbb\xbf{}", 0, kBad, {"starts with", "'{'"}},
      {"InvalidUtf8InName", "{\"w\xff\":{}}", 0, kBad, {"invalid UTF-8 at byte 3", "file offset 11"}},
      {"InvalidUtf8InDtype", w16("\"dtype\":\"F1\x80\""), 0, kBad, {"invalid UTF-8"}},
      {"InvalidUtf8OutsideStrings", "{}\xc3", 0, kBad, {"invalid UTF-8 at byte 2"}},
      {"OverlongUtf8", "{\"\xc0\xaf\":{}}", 0, kBad, {"invalid UTF-8 at byte 2"}},
      {"EncodedSurrogate", "{\"\xed\xa0\x80\":{}}", 0, kBad, {"invalid UTF-8 at byte 2"}},
      {"BeyondUnicode", "{\"\xf4\x90\x80\x80\":{}}", 0, kBad, {"invalid UTF-8 at byte 2"}},
      {"TruncatedSequence", "{\"\xe2\x82\":{}}", 0, kBad, {"invalid UTF-8 at byte 2"}},
      {"LoneSurrogateEscape", R"({"\ud800":{}})", 0, kBad, {"not valid JSON", "surrogate"}},
      {"TrailingGarbage", "{}x", 0, kBad, {"not valid JSON", "at byte 2"}},
      {"TrailingNul", std::string("{}  \0\0", 6), 0, kBad, {"NUL byte at byte 4"}},
      {"NulThenGarbage", std::string("{}\0{\"w\":1}", 9), 0, kBad, {"NUL byte at byte 2"}},
      {"NulInsideString", std::string("{\"w\0\":{}}", 8), 0, kBad,
       {"NUL byte at byte 3", "file offset 11"}},
      {"TrailingSecondObject", "{} {}", 0, kBad, {"not valid JSON", "at byte 3"}},

      // Duplicates.
      {"DuplicateTensor",
       "{" + entry("w", "U8", {1}, 0, 1) + "," + entry("w", "U8", {1}, 1, 2) + "}", 2, kBad,
       {"tensor 'w' appears twice"}},
      {"DuplicateMetadata", R"({"__metadata__":{},"__metadata__":{}})", 0, kBad,
       {"__metadata__ appears twice"}},
      {"DuplicateDtypeKey", w16(R"("dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1])"),
       1, kBad, {"tensor 'w': key 'dtype' appears twice"}},
      {"DuplicateShapeKey",
       w16(R"("dtype":"U8","shape":[1],"data_offsets":[0,1],"shape":[1])"), 1, kBad,
       {"tensor 'w': key 'shape' appears twice"}},
      {"DuplicateMetadataKey", R"({"__metadata__":{"k":"a","k":"b"}})", 0, kBad,
       {"__metadata__: key 'k' appears twice"}},

      // Entry structure.
      {"EmptyTensorName", "{" + entry("", "U8", {1}, 0, 1) + "}", 1, kBad, {"empty name"}},
      {"EntryNumber", R"({"w":3})", 0, kBad, {"tensor 'w' is 3", "expected an object"}},
      {"EntryArray", R"({"w":[]})", 0, kBad, {"tensor 'w' is an array"}},
      {"EntryString", R"({"w":"F16"})", 0, kBad, {"tensor 'w' is the string 'F16'"}},
      {"EntryNull", R"({"w":null})", 0, kBad, {"tensor 'w' is null"}},
      {"MissingDtype", w16(R"("shape":[1],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': missing \"dtype\""}},
      {"MissingShape", w16(R"("dtype":"U8","data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': missing \"shape\""}},
      {"MissingDataOffsets", w16(R"("dtype":"U8","shape":[1])"), 1, kBad,
       {"tensor 'w': missing \"data_offsets\""}},
      {"EmptyEntry", R"({"w":{}})", 0, kBad, {"tensor 'w': missing \"dtype\""}},
      {"UnknownField", w16(R"("dtype":"U8","shape":[1],"data_offsets":[0,1],"scale":2)"), 1,
       kBad, {"tensor 'w': unknown field 'scale'"}},
      {"DtypeNumber", w16(R"("dtype":16,"shape":[1],"data_offsets":[0,2])"), 2, kBad,
       {"tensor 'w': dtype is 16", "expected a string"}},
      {"DtypeNull", w16(R"("dtype":null,"shape":[1],"data_offsets":[0,2])"), 2, kBad,
       {"tensor 'w': dtype is null"}},
      {"ShapeString", w16(R"("dtype":"U8","shape":"[1]","data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape is the string '[1]'"}},
      {"ShapeObject", w16(R"("dtype":"U8","shape":{},"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape is an object"}},
      {"DataOffsetsObject", w16(R"("dtype":"U8","shape":[1],"data_offsets":{"a":0})"), 1,
       kBad, {"tensor 'w': data_offsets is an object"}},
      {"DataOffsetsNumber", w16(R"("dtype":"U8","shape":[1],"data_offsets":0)"), 1, kBad,
       {"tensor 'w': data_offsets is 0"}},

      // dtype.
      {"UnknownDtype", w16(R"("dtype":"F12","shape":[1],"data_offsets":[0,1])"), 1,
       StatusCode::kUnimplemented, {"tensor 'w': unknown dtype 'F12'", "BF16"}},
      {"LowercaseDtype", w16(R"("dtype":"f16","shape":[1],"data_offsets":[0,2])"), 2,
       StatusCode::kUnimplemented, {"tensor 'w': unknown dtype 'f16'"}},

      // shape entries.
      {"ShapeNegative", w16(R"("dtype":"U8","shape":[1,-2],"data_offsets":[0,0])"), 0, kBad,
       {"tensor 'w': shape[1] is -2", "non-negative integer"}},
      {"ShapeFraction", w16(R"("dtype":"U8","shape":[1.5],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape[0] is 1.5"}},
      {"ShapeIntegralFloat", w16(R"("dtype":"U8","shape":[2.0],"data_offsets":[0,2])"), 2,
       kBad, {"tensor 'w': shape[0] is 2.0"}},
      {"ShapeExponent", w16(R"("dtype":"U8","shape":[1e1],"data_offsets":[0,10])"), 10, kBad,
       {"tensor 'w': shape[0] is 1e1"}},
      {"ShapeQuoted", w16(R"("dtype":"U8","shape":["3"],"data_offsets":[0,3])"), 3, kBad,
       {"tensor 'w': shape[0] is the string '3'"}},
      {"ShapeBool", w16(R"("dtype":"U8","shape":[true],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape[0] is true"}},
      {"ShapeNull", w16(R"("dtype":"U8","shape":[null],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape[0] is null"}},
      {"ShapeNested", w16(R"("dtype":"U8","shape":[[1]],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape[0] is an array"}},
      {"ShapeAboveInt64", w16(R"("dtype":"U8","shape":[9223372036854775808,0],"data_offsets":[0,0])"),
       0, kBad, {"tensor 'w': shape[0] is 9223372036854775808"}},
      {"ShapeAboveUint64", w16(R"("dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1])"),
       1, kBad, {"tensor 'w': shape[0] is 18446744073709551616"}},
      {"ShapeElementCountOverflows",
       w16(R"("dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape [4294967296, 4294967296, 2] has more than 2^64 elements"}},
      {"ShapeByteCountOverflows",
       w16(R"("dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8])"), 8, kRange,
       {"tensor 'w': F64 shape [4611686018427387904] needs more than 2^64 bytes"}},
      {"ShapeBytesExceedFile", w16(R"("dtype":"F32","shape":[1000,1000],"data_offsets":[0,16])"),
       16, kRange,
       {"tensor 'w': F32 shape [1000, 1000] needs 4000000 bytes but the data section holds only 16"}},
      {"TooManyDimensions",
       w16(R"("dtype":"U8","shape":[)" + ones(65) + R"(],"data_offsets":[0,1])"), 1, kBad,
       {"tensor 'w': shape has more than 64 dimensions"}},

      // data_offsets entries.
      {"DataOffsetsEmpty", w16(R"("dtype":"U8","shape":[0],"data_offsets":[])"), 0, kBad,
       {"tensor 'w': data_offsets has 0 entries", "[begin, end]"}},
      {"DataOffsetsOne", w16(R"("dtype":"U8","shape":[0],"data_offsets":[0])"), 0, kBad,
       {"tensor 'w': data_offsets has 1 entries"}},
      {"DataOffsetsThree", w16(R"("dtype":"U8","shape":[2],"data_offsets":[0,2,4])"), 4, kBad,
       {"tensor 'w': data_offsets has more than 2 entries"}},
      {"DataOffsetsNegative", w16(R"("dtype":"U8","shape":[2],"data_offsets":[-2,0])"), 4, kBad,
       {"tensor 'w': data_offsets[0] is -2", "non-negative integer"}},
      {"DataOffsetsFloat", w16(R"("dtype":"U8","shape":[2],"data_offsets":[0,2.0])"), 4, kBad,
       {"tensor 'w': data_offsets[1] is 2.0"}},
      {"DataOffsetsString", w16(R"("dtype":"U8","shape":[2],"data_offsets":["0",2])"), 4, kBad,
       {"tensor 'w': data_offsets[0] is the string '0'"}},
      {"DataOffsetsAboveUint64",
       w16(R"("dtype":"U8","shape":[2],"data_offsets":[0,18446744073709551616])"), 4, kBad,
       {"tensor 'w': data_offsets[1] is 18446744073709551616"}},
      {"DataOffsetsBeginAfterEnd", w16(R"("dtype":"U8","shape":[2],"data_offsets":[4,2])"), 4,
       kBad, {"tensor 'w': data_offsets [4, 2) begin after they end", "begin <= end"}},

      // Sizes and ranges.
      {"SizeMismatchTooFew", "{" + entry("model.norm.weight", "F16", {64}, 0, 100) + "}", 128,
       kBad, {"tensor 'model.norm.weight': data_offsets [0, 100) hold 100 bytes but F16 shape [64] needs 128"}},
      {"SizeMismatchTooMany", "{" + entry("w", "BF16", {2, 3}, 0, 14) + "}", 14, kBad,
       {"tensor 'w': data_offsets [0, 14) hold 14 bytes but BF16 shape [2, 3] needs 12"}},
      {"ZeroSizeWithBytes", "{" + entry("w", "F32", {0}, 0, 4) + "}", 4, kBad,
       {"tensor 'w': data_offsets [0, 4) hold 4 bytes but F32 shape [0] needs 0"}},
      {"EndBeyondDataSection", "{" + entry("w", "F16", {2}, 100, 104) + "}", 8, kRange,
       {"tensor 'w': data_offsets [100, 104) run past the data section", "end <= 8"}},
      {"EndOneBeyondDataSection", "{" + entry("w", "U8", {4}, 5, 9) + "}", 8, kRange,
       {"tensor 'w': data_offsets [5, 9)"}},
      {"Overlap", "{" + entry("a", "U8", {8}, 0, 8) + "," + entry("b", "U8", {8}, 4, 12) + "}",
       12, kBad, {"tensor 'b': data_offsets [4, 12) overlap tensor 'a' at [0, 8)"}},
      {"OverlapContained",
       "{" + entry("inner", "U8", {4}, 4, 8) + "," + entry("outer", "U8", {16}, 0, 16) + "}", 16,
       kBad, {"tensor 'inner'", "overlap tensor 'outer'"}},
      {"OverlapIdentical",
       "{" + entry("a", "F32", {2}, 0, 8) + "," + entry("b", "I64", {1}, 0, 8) + "}", 8, kBad,
       {"overlap", "'a'", "'b'"}},

      // __metadata__.
      {"MetadataArray", R"({"__metadata__":[]})", 0, kBad,
       {"__metadata__ is an array", "object of string values"}},
      {"MetadataString", R"({"__metadata__":"pt"})", 0, kBad,
       {"__metadata__ is the string 'pt'"}},
      {"MetadataNull", R"({"__metadata__":null})", 0, kBad, {"__metadata__ is null"}},
      {"MetadataValueNumber", R"({"__metadata__":{"step":3}})", 0, kBad,
       {"__metadata__ 'step' is 3", "expected a string"}},
      {"MetadataValueObject", R"({"__metadata__":{"cfg":{}}})", 0, kBad,
       {"__metadata__ 'cfg' is an object"}},
      {"MetadataValueNull", R"({"__metadata__":{"x":null}})", 0, kBad,
       {"__metadata__ 'x' is null"}},
  };
  return cases;
}

class BadHeaderTest : public TempDirTest, public ::testing::WithParamInterface<BadHeader> {};

TEST_P(BadHeaderTest, IsRejected) {
  const BadHeader &c = GetParam();
  std::string bytes = fileBytes(c.json, c.dataSize);
  std::string p = write("bad.safetensors", bytes);
  auto fromFile = readSafetensorsHeader(p);
  expectError(fromFile, c.code, p, c.needles);

  auto fromMemory = parseSafetensorsHeader(bytes, bytes.size(), "mem.safetensors");
  expectError(fromMemory, c.code, "mem.safetensors", c.needles);
  if (!fromFile.isOk() && !fromMemory.isOk()) { // same wording after the name
    EXPECT_EQ(fromFile.status().message().substr(p.size()),
              fromMemory.status().message().substr(std::string("mem.safetensors").size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Malformed, BadHeaderTest, ::testing::ValuesIn(badHeaders()),
                         [](const ::testing::TestParamInfo<BadHeader> &info) {
                           return std::string(info.param.label);
                         });

TEST_F(SafetensorsTest, SizeMismatchMessageIsExact) {
  std::string header = "{" + entry("model.norm.weight", "F16", {64}, 0, 100) + "}";
  auto h = parseSafetensorsHeader(fileBytes(header, 128), 8 + header.size() + 128,
                                  "ckpt/model.safetensors");
  ASSERT_FALSE(h.isOk());
  EXPECT_EQ(h.status().message(),
            "ckpt/model.safetensors: tensor 'model.norm.weight': data_offsets [0, 100) "
            "hold 100 bytes but F16 shape [64] needs 128");
}

//===----------------------------------------------------------------------===//
// Shard index
//===----------------------------------------------------------------------===//

using ShardIndexTest = TempDirTest;

TEST_F(ShardIndexTest, ValidIndex) {
  std::string json = R"({
    "metadata": {"total_size": 16060522496, "format": {"nested": [1, 2]}},
    "weight_map": {
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.layers.0.mlp.up_proj.weight": "model-00002-of-00002.safetensors",
      "lm_head.weight": "model-00002-of-00002.safetensors",
      "model.norm.weight": "model-00001-of-00002.safetensors"
    },
    "producer": "something we ignore"
  })";
  std::string p = write("model.safetensors.index.json", json);
  auto index = readShardIndex(p);
  ASSERT_TRUE(index.isOk()) << index.status().message();
  EXPECT_EQ(index->weightMap.size(), 4u);
  EXPECT_EQ(index->weightMap.at("lm_head.weight"), "model-00002-of-00002.safetensors");
  ASSERT_TRUE(index->totalSize.has_value());
  EXPECT_EQ(*index->totalSize, 16060522496ull);
  EXPECT_EQ(index->shardFiles(), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                           "model-00002-of-00002.safetensors"}));

  auto parsed = parseShardIndex(json, "mem.json");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->weightMap, index->weightMap);
}

TEST_F(ShardIndexTest, MetadataIsOptional) {
  auto index = parseShardIndex(R"({"weight_map":{"w":"a.safetensors"}})", "i.json");
  ASSERT_TRUE(index.isOk()) << index.status().message();
  EXPECT_FALSE(index->totalSize.has_value());
  EXPECT_EQ(index->shardFiles(), std::vector<std::string>{"a.safetensors"});
}

TEST_F(ShardIndexTest, IntegralFloatTotalSizeIsAccepted) {
  auto index = parseShardIndex(R"({"metadata":{"total_size":1024.0},"weight_map":{"w":"a"}})",
                               "i.json");
  ASSERT_TRUE(index.isOk()) << index.status().message();
  EXPECT_EQ(index->totalSize, 1024u);
}

TEST_F(ShardIndexTest, MissingFile) {
  std::string p = path("model.safetensors.index.json");
  expectError(readShardIndex(p), StatusCode::kNotFound, p, {"cannot open"});
}

struct BadIndex {
  const char *label;
  std::string json;
  std::vector<std::string> needles;
};

std::ostream &operator<<(std::ostream &os, const BadIndex &c) { return os << c.label; }

const std::vector<BadIndex> &badIndexes() {
  static const std::vector<BadIndex> cases = {
      {"Empty", "", {"index is empty"}},
      {"NotJson", R"({"weight_map": {"w": "a.safetensors",}})", {"not valid JSON", "at byte 37"}},
      {"NotAnObject", R"(["a.safetensors"])", {"starts with '['", "JSON object"}},
      {"InvalidUtf8", "{\"weight_map\":{\"w\xfe\":\"a\"}}", {"invalid UTF-8 at byte 17"}},
      {"TrailingGarbage", R"({"weight_map":{"w":"a"}} ,)", {"not valid JSON"}},
      {"DuplicateTensor", R"({"weight_map":{"w":"a","w":"b"}})",
       {"weight_map: tensor 'w' appears twice"}},
      {"DuplicateWeightMap", R"({"weight_map":{"w":"a"},"weight_map":{"v":"b"}})",
       {"key 'weight_map' appears twice in the top level"}},
      {"DuplicateMetadataKey",
       R"({"metadata":{"total_size":1,"total_size":2},"weight_map":{"w":"a"}})",
       {"key 'total_size' appears twice in metadata"}},
      {"DuplicateNestedKey", R"({"metadata":{"x":[{"k":1,"k":2}]},"weight_map":{"w":"a"}})",
       {"key 'k' appears twice in metadata.x[0]"}},
      {"MissingWeightMap", R"({"metadata":{"total_size":4}})", {"missing \"weight_map\""}},
      {"WeightMapArray", R"({"weight_map":["a"]})", {"weight_map is an array", "object"}},
      {"WeightMapString", R"({"weight_map":"a"})", {"weight_map is the string 'a'"}},
      {"WeightMapNull", R"({"weight_map":null})", {"weight_map is null"}},
      {"EmptyWeightMap", R"({"weight_map":{}})", {"weight_map is empty"}},
      {"FileNameNumber", R"({"weight_map":{"w":1}})",
       {"weight_map: tensor 'w' maps to 1", "string"}},
      {"FileNameNull", R"({"weight_map":{"w":null}})", {"weight_map: tensor 'w' maps to null"}},
      {"FileNameObject", R"({"weight_map":{"w":{"file":"a"}}})",
       {"weight_map: tensor 'w' maps to an object"}},
      {"FileNameWithSlash", R"({"weight_map":{"w":"sub/a.safetensors"}})",
       {"weight_map: tensor 'w' maps to 'sub/a.safetensors'", "no path separators"}},
      {"AbsoluteFileName", R"({"weight_map":{"w":"/etc/passwd"}})",
       {"tensor 'w' maps to '/etc/passwd'"}},
      {"FileNameWithBackslash", R"({"weight_map":{"w":"..\\a.safetensors"}})",
       {"tensor 'w' maps to '..\\a.safetensors'"}},
      {"FileNameDotDot", R"({"weight_map":{"w":".."}})", {"tensor 'w' maps to '..'"}},
      {"FileNameDot", R"({"weight_map":{"w":"."}})", {"tensor 'w' maps to '.'"}},
      {"FileNameEmpty", R"({"weight_map":{"w":""}})", {"tensor 'w' maps to ''"}},
      {"FileNameControlChar", R"({"weight_map":{"w":"a\nb"}})",
       {"tensor 'w' maps to 'a\\x0ab'"}},
      {"EmptyTensorName", R"({"weight_map":{"":"a"}})", {"weight_map has an empty tensor name"}},
      {"MetadataNotObject", R"({"metadata":[],"weight_map":{"w":"a"}})",
       {"metadata is an array"}},
      {"TotalSizeString", R"({"metadata":{"total_size":"12"},"weight_map":{"w":"a"}})",
       {"metadata.total_size is the string '12'"}},
      {"TotalSizeNegative", R"({"metadata":{"total_size":-1},"weight_map":{"w":"a"}})",
       {"metadata.total_size is -1"}},
      {"TotalSizeFraction", R"({"metadata":{"total_size":1.5},"weight_map":{"w":"a"}})",
       {"metadata.total_size is 1.5"}},
      {"TooDeep", R"({"metadata":{"x":)" + std::string(100, '[') + std::string(100, ']') +
                      R"(},"weight_map":{"w":"a"}})",
       {"nests deeper than 64 levels"}},
  };
  return cases;
}

class BadIndexTest : public TempDirTest, public ::testing::WithParamInterface<BadIndex> {};

TEST_P(BadIndexTest, IsRejected) {
  const BadIndex &c = GetParam();
  std::string p = write("model.safetensors.index.json", c.json);
  expectError(readShardIndex(p), StatusCode::kInvalidArgument, p, c.needles);
  expectError(parseShardIndex(c.json, "mem.json"), StatusCode::kInvalidArgument, "mem.json",
              c.needles);
}

INSTANTIATE_TEST_SUITE_P(Malformed, BadIndexTest, ::testing::ValuesIn(badIndexes()),
                         [](const ::testing::TestParamInfo<BadIndex> &info) {
                           return std::string(info.param.label);
                         });

} // namespace

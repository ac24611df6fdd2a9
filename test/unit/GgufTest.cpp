// The GGUF reader on files this test writes: a valid file (metadata of
// every value type, nested arrays, tensors of several ggml types) reads
// back exactly; every truncation, hostile count, length, offset and
// dimension is refused in one line naming the file and what is wrong,
// without allocating what the file only claims.
#include "runtime/io/Gguf.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace weft::io {
namespace {

// Writes GGUF bytes field by field.
struct Writer {
  std::string bytes;
  template <class T> Writer &put(T v) {
    bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
    return *this;
  }
  Writer &str(const std::string &s) {
    put(uint64_t(s.size()));
    bytes += s;
    return *this;
  }
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type;
  uint64_t offset;
};

// A file: header, `metadata` (already encoded key/type/value runs), the
// tensors' index, padding to the alignment and `dataBytes` of data.
std::string gguf(uint32_t version, uint64_t metadataCount, const std::string &metadata,
                 const std::vector<TensorSpec> &tensors, uint64_t dataBytes,
                 uint64_t alignment = 32) {
  Writer w;
  w.bytes = "GGUF";
  w.put(version).put(uint64_t(tensors.size())).put(metadataCount);
  w.bytes += metadata;
  for (const TensorSpec &t : tensors) {
    w.str(t.name).put(uint32_t(t.dims.size()));
    for (uint64_t d : t.dims)
      w.put(d);
    w.put(t.type).put(t.offset);
  }
  while (w.bytes.size() % alignment)
    w.bytes += '\0';
  w.bytes.append(size_t(dataBytes), '\x5a');
  return w.bytes;
}

std::string kv(const std::string &key, uint32_t type, const std::string &value) {
  Writer w;
  w.str(key).put(type);
  w.bytes += value;
  return w.bytes;
}
template <class T> std::string raw(T v) {
  return std::string(reinterpret_cast<const char *>(&v), sizeof v);
}
std::string strValue(const std::string &s) { return Writer().str(s).bytes; }

// A small valid model-like file.
std::string validFile() {
  std::string m;
  m += kv("general.architecture", 8, strValue("llama"));
  m += kv("llama.block_count", 4, raw(uint32_t(2)));
  m += kv("llama.rope.freq_base", 6, raw(10000.0f));
  m += kv("general.flag", 7, raw(uint8_t(1)));
  m += kv("general.signed", 11, raw(int64_t(-5)));
  m += kv("general.double", 12, raw(2.5));
  // tokenizer.ggml.tokens: an array of three strings
  m += kv("tokenizer.ggml.tokens", 9,
          raw(uint32_t(8)) + raw(uint64_t(3)) + strValue("a") + strValue("bc") + strValue("<s>"));
  // an array of arrays of u16
  m += kv("test.nested", 9,
          raw(uint32_t(9)) + raw(uint64_t(2)) + raw(uint32_t(2)) + raw(uint64_t(1)) +
              raw(uint16_t(7)) + raw(uint32_t(2)) + raw(uint64_t(2)) + raw(uint16_t(8)) +
              raw(uint16_t(9)));
  // token_embd: Q8_0 [64, 3] = 2 blocks a row, 3 rows: 6 * 34 = 204 bytes
  // at 0; output_norm: F32 [64] = 256 bytes at 224; blk.0.attn_q: Q4_K
  // [256, 2] = 2 * 144 = 288 bytes at 480.
  return gguf(3, 8, m,
              {{"token_embd.weight", {64, 3}, 8, 0},
               {"output_norm.weight", {64}, 0, 224},
               {"blk.0.attn_q.weight", {256, 2}, 12, 480}},
              768);
}

TEST(GgufTest, ValidFileReadsBack) {
  std::string bytes = validFile();
  StatusOr<GgufFile> f = parseGguf(bytes, bytes.size(), "m.gguf");
  ASSERT_TRUE(f.isOk()) << f.status().message();
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 32u);
  EXPECT_EQ(f->dataOffset % 32, 0u);
  EXPECT_EQ(f->find("general.architecture")->s, "llama");
  EXPECT_EQ(f->find("llama.block_count")->asUnsigned(), 2u);
  EXPECT_EQ(f->find("llama.rope.freq_base")->asNumber(), 10000.0);
  EXPECT_EQ(f->find("general.flag")->u, 1u);
  EXPECT_EQ(f->find("general.signed")->i, -5);
  EXPECT_FALSE(f->find("general.signed")->asUnsigned().has_value());
  EXPECT_EQ(f->find("general.double")->f, 2.5);
  const GgufValue *tokens = f->find("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->array.size(), 3u);
  EXPECT_EQ(tokens->array[2].s, "<s>");
  const GgufValue *nested = f->find("test.nested");
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array[1].array[1].u, 9u);
  ASSERT_EQ(f->tensors.size(), 3u);
  const GgufTensor *q = f->tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(q);
  EXPECT_EQ(*ggmlTypeName(q->type), "Q4_K");
  EXPECT_EQ(q->dims, (std::vector<uint64_t>{256, 2}));
  EXPECT_EQ(q->numElements(), 512u);
  EXPECT_EQ(q->bytes, 288u);
  EXPECT_EQ(q->offset, f->dataOffset + 480);
  EXPECT_EQ(f->tensor("token_embd.weight")->bytes, 204u);
  EXPECT_EQ(f->tensor("output_norm.weight")->bytes, 256u);
}

TEST(GgufTest, EveryTruncationIsRefusedInOneLine) {
  std::string bytes = validFile();
  StatusOr<GgufFile> whole = parseGguf(bytes, bytes.size(), "m.gguf");
  ASSERT_TRUE(whole.isOk());
  // Cut anywhere before the data section ends: refused (the index, or a
  // tensor's bytes past the end).
  for (size_t n = 0; n < bytes.size(); ++n) {
    StatusOr<GgufFile> f = parseGguf(std::string_view(bytes).substr(0, n), n, "cut.gguf");
    ASSERT_FALSE(f.isOk()) << "cut at " << n;
    const std::string &m = f.status().message();
    EXPECT_EQ(m.rfind("cut.gguf: GGUF ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// A file whose bytes after the header are `rest`, with the given counts.
std::string headerThen(uint64_t tensors, uint64_t metadata, const std::string &rest) {
  Writer w;
  w.bytes = "GGUF";
  w.put(uint32_t(3)).put(tensors).put(metadata);
  return w.bytes + rest;
}

void expectRefused(const std::string &bytes, const std::string &what) {
  auto start = std::chrono::steady_clock::now();
  StatusOr<GgufFile> f = parseGguf(bytes, bytes.size(), "bad.gguf");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(f.isOk()) << what;
  EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status().message();
  EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
  EXPECT_LT(seconds, 1.0) << what;
}

TEST(GgufTest, HostileFilesAreRefused) {
  expectRefused("GGML" + std::string(20, '\0'), "no 'GGUF' magic");
  expectRefused(std::string("GGUF") + raw(uint32_t(7)) + raw(uint64_t(0)) + raw(uint64_t(0)),
                "version 7 (expected 2 or 3)");
  // Counts the file cannot hold: refused before anything is allocated.
  expectRefused(headerThen(0, 1000000000ull, ""), "metadata entries (at most");
  expectRefused(headerThen(0, 60000, std::string(100, 'x')), "cannot fit a file of");
  expectRefused(headerThen(1u << 21, 0, ""), "tensors (at most");
  // A string longer than the file, an array longer than the file.
  expectRefused(headerThen(0, 1, raw(uint64_t(1ull << 40)) + std::string(20, 'k')),
                "a metadata key of 1099511627776 bytes runs past the end of the file");
  expectRefused(headerThen(0, 1, kv("k", 9, raw(uint32_t(4)) + raw(uint64_t(1ull << 30)))),
                "an array of 1073741824 u32 values runs past the end of the file");
  expectRefused(headerThen(0, 1, kv("k", 13, "")), "unknown value type 13");
  expectRefused(headerThen(0, 1, kv("k", 9, raw(uint32_t(77)) + raw(uint64_t(0)))),
                "unknown array element type 77");
  expectRefused(headerThen(0, 1, kv("k", 7, raw(uint8_t(2)))), "a bool of 2");
  // Arrays of arrays of arrays.
  expectRefused(headerThen(0, 1, kv("k", 9, raw(uint32_t(9)) + raw(uint64_t(1)) +
                                                 raw(uint32_t(9)) + raw(uint64_t(1)) +
                                                 raw(uint32_t(4)) + raw(uint64_t(0)))),
                "arrays nested deeper than 2");
  expectRefused(headerThen(0, 2, kv("k", 4, raw(uint32_t(1))) + kv("k", 4, raw(uint32_t(1)))),
                "key 'k' appears twice");
  expectRefused(headerThen(0, 1, kv("bad\x01key", 4, raw(uint32_t(1)))),
                "is empty or not printable ASCII");
  expectRefused(gguf(3, 1, kv("general.alignment", 4, raw(uint32_t(24))), {}, 0),
                "'general.alignment': expected a power of two");
  // Tensors: past the end, overlapping, misaligned, odd dimensions and types.
  expectRefused(gguf(3, 0, "", {{"a", {64}, 0, 0}}, 100), "run past its 100 bytes");
  expectRefused(gguf(3, 0, "", {{"a", {64}, 0, 0}, {"b", {64}, 0, 128}}, 512),
                "tensors 'a' and 'b' overlap");
  expectRefused(gguf(3, 0, "", {{"a", {8}, 0, 4}}, 512), "is not a multiple of the alignment");
  expectRefused(gguf(3, 0, "", {{"a", {8, 0}, 0, 0}}, 512), "dimension 1 is 0");
  expectRefused(gguf(3, 0, "", {{"a", {1ull << 41}, 0, 0}}, 512), "dimension 0 is");
  expectRefused(gguf(3, 0, "", {{"a", {1ull << 40, 1ull << 40}, 0, 0}}, 512), "dimension 1 is");
  expectRefused(gguf(3, 0, "", {{"a", {1, 1, 1, 1, 1}, 0, 0}}, 512), "5 dimensions");
  expectRefused(gguf(3, 0, "", {{"a", {33}, 8, 0}}, 512),
                "33 elements a row is not whole Q8_0 blocks of 32");
  expectRefused(gguf(3, 0, "", {{"a", {32}, 39, 0}}, 512), "ggml type 39 has no known layout");
  expectRefused(gguf(3, 0, "", {{"a", {8}, 0, 0}, {"a", {8}, 0, 32}}, 512),
                "tensor 'a' appears twice");
}

TEST(GgufTest, ReadsAFileFromDisk) {
  std::string path = ::testing::TempDir() + "/weft_gguf_test.gguf";
  std::string bytes = validFile();
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  StatusOr<GgufFile> g = readGguf(path);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(g->tensors.size(), 3u);
  StatusOr<GgufFile> missing = readGguf(path + ".missing");
  EXPECT_FALSE(missing.isOk());
  std::remove(path.c_str());
}

} // namespace
} // namespace weft::io

// ggml block dequantization against the `gguf` Python package's reference:
// test/fixtures/ggml/blocks.json (test/Inputs/make_ggml_blocks.py) holds
// random blocks of every supported type, some with extreme scales (zero,
// subnormal, the largest f16, negative), and the values the reference
// computed; every value must match bit for bit (NaN matching NaN).
#include "runtime/io/Gguf.h"
#include "runtime/io/GgufQuants.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

namespace weft::io {
namespace {

std::vector<uint8_t> fromHex(const std::string &hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(GgufQuantsTest, EveryTypeMatchesTheReferenceBitForBit) {
  std::ifstream f(std::string(WEFT_FIXTURES_DIR) + "/ggml/blocks.json");
  ASSERT_TRUE(f) << "test/fixtures/ggml/blocks.json";
  nlohmann::json all = nlohmann::json::parse(f);
  const std::pair<const char *, GgmlType> types[] = {
      {"Q4_0", GgmlType::Q4_0}, {"Q4_1", GgmlType::Q4_1}, {"Q5_0", GgmlType::Q5_0},
      {"Q5_1", GgmlType::Q5_1}, {"Q8_0", GgmlType::Q8_0}, {"Q4_K", GgmlType::Q4_K},
      {"Q5_K", GgmlType::Q5_K}, {"Q6_K", GgmlType::Q6_K}};
  for (auto [name, type] : types) {
    ASSERT_TRUE(all.contains(name)) << name;
    GgmlBlock block = *ggmlBlock(uint32_t(type));
    int checked = 0;
    for (const nlohmann::json &b : all[name]) {
      std::vector<uint8_t> bytes = fromHex(b["bytes"].get<std::string>());
      ASSERT_EQ(bytes.size(), block.bytes) << name;
      std::vector<float> got(size_t(block.elements));
      ASSERT_TRUE(dequantizeGgml(uint32_t(type), bytes.data(), 1, got.data()).isOk());
      std::vector<uint32_t> want = b["f32"].get<std::vector<uint32_t>>();
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < got.size(); ++i) {
        float w;
        std::memcpy(&w, &want[i], 4);
        uint32_t g;
        std::memcpy(&g, &got[i], 4);
        if (std::isnan(w) && std::isnan(got[i]))
          continue;
        ASSERT_EQ(g, want[i]) << name << " block " << checked << " value " << i << ": " << got[i]
                              << " against " << w;
      }
      ++checked;
    }
    EXPECT_GE(checked, 5) << name;
  }
}

TEST(GgufQuantsTest, ManyBlocksAndRefusedTypes) {
  // Two Q8_0 blocks in a row: d = 1 and d = 2 (f16 0x3C00, 0x4000), q = j.
  uint8_t bytes[68] = {};
  bytes[1] = 0x3C;
  bytes[35] = 0x40;
  for (int j = 0; j < 32; ++j) {
    bytes[2 + j] = uint8_t(j - 16);
    bytes[36 + j] = uint8_t(j);
  }
  float y[64];
  ASSERT_TRUE(dequantizeGgml(uint32_t(GgmlType::Q8_0), bytes, 2, y).isOk());
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 15.0f);
  EXPECT_EQ(y[33], 2.0f);
  EXPECT_EQ(y[63], 62.0f);
  Status q2 = dequantizeGgml(uint32_t(GgmlType::Q2_K), bytes, 0, y);
  ASSERT_FALSE(q2.isOk());
  EXPECT_NE(q2.message().find("ggml type Q2_K cannot be dequantized here"), std::string::npos)
      << q2.message();
  Status unknown = dequantizeGgml(99, bytes, 1, y);
  EXPECT_NE(unknown.message().find("ggml type 99 has no known layout"), std::string::npos);
}

} // namespace
} // namespace weft::io

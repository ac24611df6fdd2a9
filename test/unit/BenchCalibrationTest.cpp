// weft-run --bench --write-calibration: the fit of measured step times to
// the plan's predictions, and the write-back into a topology file.
#include "tools/weft-run/BenchCalibration.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace weft::benchcal;

namespace {

Measurement decode(int64_t tokens, int64_t context, double other, double attention,
                   double measured) {
  Measurement m;
  m.tokens = tokens;
  m.context = context;
  m.seconds = measured;
  m.predicted.rawOther = other;
  m.predicted.rawAttention = attention;
  m.predicted.seconds = other + attention;
  return m;
}

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST(BenchCalibration, TwoContextsSeparateWeightsFromAttention) {
  // measured = 1.2 x other + 1.5 x attention, exactly.
  std::vector<Measurement> m = {decode(8, 512, 4.0, 1.0, 1.2 * 4 + 1.5 * 1),
                                decode(8, 4095, 4.0, 3.0, 1.2 * 4 + 1.5 * 3),
                                decode(1, 512, 4.0, 0.1, 2.05)};
  std::vector<Scale> s = fitScales(m, false);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].tokens, 1);
  EXPECT_NEAR(s[0].weights, 0.5, 1e-12); // one context: one ratio for both
  EXPECT_NEAR(s[0].attention, 0.5, 1e-12);
  EXPECT_EQ(s[1].tokens, 8);
  EXPECT_NEAR(s[1].weights, 1.2, 1e-9);
  EXPECT_NEAR(s[1].attention, 1.5, 1e-9);
  EXPECT_TRUE(fitScales(m, true).empty()); // no prefill measured
}

TEST(BenchCalibration, ScalesStayInTheRangeTheCompilerAccepts) {
  std::vector<Scale> s = fitScales({decode(4, 512, 1.0, 0.0, 50.0)}, false);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].weights, 5.0);
}

TEST(BenchCalibration, WritesStepsIntoEveryDeviceAndKeepsTheRest) {
  std::string path = testing::TempDir() + "/weft-topology-calibration.json";
  {
    std::ofstream out(path);
    out << R"({"name": "box", "devices": [{"builtin": "h200", "memory_bytes": 150754820096},
               {"builtin": "h200", "calibration": {"gpu": "NVIDIA H200", "copy_bandwidth_gbps": 4290}}],
               "links": [], "host": {"ram_gib": 64}})";
  }
  ASSERT_TRUE(writeCalibration(path, 2, "NVIDIA H200", "580.1", {{1, 1.06, 1.49}}, {{512, 0.63, 0.63}})
                  .isOk());
  nlohmann::json t = nlohmann::json::parse(slurp(path));
  EXPECT_EQ(t["name"], "box");
  EXPECT_EQ(t["devices"][0]["memory_bytes"], 150754820096ull);
  EXPECT_EQ(t["devices"][0]["calibration"]["gpu"], "NVIDIA H200");
  EXPECT_EQ(t["devices"][0]["calibration"]["driver"], "580.1");
  EXPECT_EQ(t["devices"][0]["calibration"]["steps"][0]["tokens"], 1);
  EXPECT_DOUBLE_EQ(t["devices"][0]["calibration"]["steps"][0]["weights_scale"], 1.06);
  EXPECT_EQ(t["devices"][1]["calibration"]["copy_bandwidth_gbps"], 4290); // kept
  EXPECT_DOUBLE_EQ(t["devices"][1]["calibration"]["prefill_steps"][0]["attention_scale"], 0.63);

  weft::Status wrongCount = writeCalibration(path, 3, "NVIDIA H200", "", {{1, 1, 1}}, {});
  ASSERT_FALSE(wrongCount.isOk());
  EXPECT_NE(wrongCount.message().find("describes 2 devices, the plan 3"), std::string::npos);
  weft::Status nothing = writeCalibration(path, 2, "NVIDIA H200", "", {}, {});
  ASSERT_FALSE(nothing.isOk());
  EXPECT_NE(nothing.message().find("no bucket measured against a prediction"), std::string::npos);
  weft::Status missing = writeCalibration(path + ".missing", 2, "x", "", {{1, 1, 1}}, {});
  EXPECT_FALSE(missing.isOk());
  std::remove(path.c_str());
}

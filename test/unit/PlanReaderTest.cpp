// Tests for the plan reader, its JSON and summary views: a valid plan round
// trip, damaged bytes, and one case per semantic rule, each checking that the
// message is one line naming the offending field.
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/PlanReader.h"

#include "PlanTestUtil.h"
#include "TestFiles.h"

#include <gtest/gtest.h>
#include <sstream>
#include <set>
#include <regex>
#include <map>
#include <fstream>

#include <cmath>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::plan;
using namespace weft::testing;

namespace {

constexpr const char *kName = "plan.weft";

std::vector<uint8_t> tinyBytes() { return planBytes(tinyPlan()); }

StatusOr<PlanFile> load(std::vector<uint8_t> bytes) {
  return PlanFile::fromBytes(std::move(bytes), kName);
}

// The failure is one line that starts with `prefix`.
::testing::AssertionResult oneLineError(const StatusOr<PlanFile> &result,
                                        const std::string &prefix) {
  if (result.isOk())
    return ::testing::AssertionFailure() << "accepted";
  const std::string &m = result.status().message();
  if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos)
    return ::testing::AssertionFailure() << "more than one line: " << m;
  if (m.compare(0, prefix.size(), prefix) != 0)
    return ::testing::AssertionFailure() << "'" << m << "' does not start with '" << prefix
                                         << "'";
  return ::testing::AssertionSuccess();
}

// Byte offset in `bytes` of field `vt` of `table`, which lies inside `bytes`.
size_t fieldOffset(const std::vector<uint8_t> &bytes, const void *table, uint16_t vt) {
  const auto *t = static_cast<const uint8_t *>(table);
  int32_t soffset;
  std::memcpy(&soffset, t, 4);
  const uint8_t *vtable = t - soffset;
  uint16_t vtableSize, field;
  std::memcpy(&vtableSize, vtable, 2);
  EXPECT_LT(vt, vtableSize);
  std::memcpy(&field, vtable + vt, 2);
  EXPECT_NE(field, 0);
  return size_t(t + field - bytes.data());
}

size_t offsetIn(const std::vector<uint8_t> &bytes, const void *p) {
  return size_t(static_cast<const uint8_t *>(p) - bytes.data());
}

void put32(std::vector<uint8_t> &bytes, size_t at, uint32_t v) {
  std::memcpy(bytes.data() + at, &v, 4);
}

//===----------------------------------------------------------------------===//
// Checksum
//===----------------------------------------------------------------------===//

TEST(PlanFnv1a64, KnownVectors) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  // Hashing in pieces gives the same result.
  EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), 0x85944171f73967e8ull);
}

//===----------------------------------------------------------------------===//
// Valid plans
//===----------------------------------------------------------------------===//

TEST(PlanReader, RoundTrip) {
  auto file = load(tinyBytes());
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const fb::Plan &p = file->plan();
  EXPECT_EQ(file->displayName(), kName);
  EXPECT_EQ(p.version(), kPlanFormatVersion);
  EXPECT_EQ(p.compiler()->str(), "weft-compile test");
  EXPECT_EQ(p.model()->name()->str(), "tiny-llama");
  EXPECT_EQ(p.model()->num_layers(), 2);
  EXPECT_EQ(p.model()->dtype(), fb::DType::BF16);
  EXPECT_DOUBLE_EQ(p.model()->rms_norm_eps(), 1e-5);
  ASSERT_EQ(p.topology()->devices()->size(), 2u);
  EXPECT_EQ(p.topology()->devices()->Get(1)->name()->str(), "rtx3060");
  EXPECT_EQ(p.topology()->devices()->Get(1)->memory_cap_bytes(), 10ull << 30);
  EXPECT_EQ(p.partition()->stages()->Get(1)->first_layer(), 1);
  EXPECT_EQ(p.partition()->runners_up()->size(), 1u);

  const fb::Weight *qkv = p.manifest()->weights()->Get(1);
  EXPECT_EQ(qkv->transform(), fb::Transform::Concat);
  ASSERT_EQ(qkv->sources()->size(), 3u);
  EXPECT_EQ(qkv->sources()->Get(2)->name()->str(), "model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(qkv->shard_axis(), -1);
  EXPECT_EQ(qkv->shard_parts(), 1);
  EXPECT_EQ(p.manifest()->files()->Get(0)->header_fnv1a64(), 0x0123456789abcdefull);

  const fb::KernelBinary *bin = p.kernels()->Get(0)->binaries()->Get(0);
  EXPECT_EQ(fnv1a64(bin->cubin()->data(), bin->cubin()->size()), 0x85944171f73967e8ull);
  EXPECT_EQ(p.kernels()->Get(1)->binaries()->Get(0)->cubin(), nullptr);

  const fb::Bucket *decode = p.buckets()->Get(0);
  EXPECT_EQ(decode->name()->str(), "decode_b1");
  ASSERT_EQ(decode->steps()->size(), 7u);
  const fb::Launch *attention = decode->steps()->Get(2)->op_as_Launch();
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->kernel(), 1);
  EXPECT_EQ(attention->args()->Get(1)->kind(), fb::ArgKind::KCache);
  EXPECT_EQ(attention->args()->Get(4)->value(), 16);
  EXPECT_EQ(attention->args()->Get(5)->offset(), 128u);
  const fb::Copy *copy = decode->steps()->Get(3)->op_as_Copy();
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->target_device(), 1);
  const fb::Gemm *gemm = decode->steps()->Get(4)->op_as_Gemm();
  ASSERT_NE(gemm, nullptr);
  EXPECT_NE(gemm->residual(), nullptr);
  EXPECT_EQ(gemm->bias(), nullptr);
  EXPECT_NE(p.buckets()->Get(1)->steps()->Get(2)->op_as_AllReduce(), nullptr);
  EXPECT_EQ(p.kv_cache()->blocks_per_device()->Get(1), 96);
  EXPECT_EQ(p.generation_config_json()->str(), "{\"eos_token_id\":2}");

  // Moving the file keeps the plan readable.
  PlanFile moved = std::move(file).value();
  EXPECT_EQ(moved.plan().model()->name()->str(), "tiny-llama");
}

TEST(PlanReader, OpensFile) {
  TempDir dir;
  std::vector<uint8_t> bytes = tinyBytes();
  writeFile(dir.file("tiny.weft"), std::string(bytes.begin(), bytes.end()));
  auto file = PlanFile::open(dir.file("tiny.weft"));
  ASSERT_TRUE(file.isOk()) << file.status().message();
  EXPECT_EQ(file->bytes(), bytes);
  EXPECT_EQ(file->displayName(), dir.file("tiny.weft"));
}

// The tensor-parallel variant: one stage on both devices with an offloaded
// layer, lm_head split in two along its rows.
fb::PlanT tensorParallelPlan() {
  fb::PlanT plan = tinyPlan();
  plan.partition->stages.pop_back();
  plan.partition->stages[0]->devices = {0, 1};
  plan.partition->stages[0]->end_layer = 2;
  plan.partition->stages[0]->offloaded_layers = 1;
  plan.partition->objective = "throughput";
  fb::WeightT &lmHead = *plan.manifest->weights[3];
  lmHead.shard_axis = 0;
  lmHead.shard_parts = 2;
  lmHead.devices = {0, 1};
  // Each rank's lm_head GEMM covers its half of the rows.
  for (auto &bucket : plan.buckets)
    for (auto &step : bucket->steps)
      if (step->region == "lm_head")
        step->op.AsGemm()->n /= 2;
  plan.kv_cache->kv_heads_per_device = {1, 1};
  return plan;
}

TEST(PlanReader, TensorParallelVariant) {
  auto file = load(planBytes(tensorParallelPlan()));
  ASSERT_TRUE(file.isOk()) << file.status().message();
  std::string summary = planSummary(file->plan());
  EXPECT_NE(summary.find("stage 0: devices [0, 1], layers [0, 2), 1 offloaded to host RAM"),
            std::string::npos)
      << summary;
}

// The committed lit input and fuzz seeds. Regenerate them after changing
// tinyPlan() or the schema with
//   WEFT_WRITE_PLAN_FILES=1 build/test/unit/weft-unit-tests --gtest_filter='PlanFiles.*'
TEST(PlanFiles, CommittedPlansAreValid) {
  const std::string tiny = std::string(WEFT_TEST_INPUTS_DIR) + "/tiny.weft";
  const std::string corpus = WEFT_PLAN_CORPUS_DIR;
  if (const char *write = std::getenv("WEFT_WRITE_PLAN_FILES"); write && *write == '1') {
    auto save = [](const std::string &path, const std::vector<uint8_t> &bytes) {
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      writeFile(path, std::string(bytes.begin(), bytes.end()));
      std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
    };
    save(tiny, tinyBytes());
    save(corpus + "/tiny.weft", tinyBytes());
    save(corpus + "/tensor_parallel.weft", planBytes(tensorParallelPlan()));
  }
  for (const std::string &path :
       {tiny, corpus + "/tiny.weft", corpus + "/tensor_parallel.weft"}) {
    auto file = PlanFile::open(path);
    EXPECT_TRUE(file.isOk()) << file.status().message();
  }
}

//===----------------------------------------------------------------------===//
// JSON and summary
//===----------------------------------------------------------------------===//

TEST(PlanJson, RendersEveryTable) {
  auto file = load(tinyBytes());
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const std::string text = planToJson(file->plan());
  EXPECT_EQ(text, planToJson(file->plan())); // deterministic
  EXPECT_EQ(text.back(), '\n');
  nlohmann::json j = nlohmann::json::parse(text);

  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["model"]["name"], "tiny-llama");
  EXPECT_EQ(j["model"]["dtype"], "BF16");
  EXPECT_EQ(j["model"]["eos_token_ids"], nlohmann::json::array({2}));
  EXPECT_EQ(j["topology"]["devices"][0]["memory_bytes"], 24ull << 30);
  EXPECT_EQ(j["topology"]["links"][0]["kind"], "pcie");
  EXPECT_EQ(j["partition"]["stages"][1]["devices"], nlohmann::json::array({1}));
  EXPECT_EQ(j["partition"]["chosen"]["description"], "pipeline rtx3090[0,1) | rtx3060[1,2)");
  EXPECT_EQ(j["partition"]["runners_up"][0]["latency_ms"], 1.5);
  EXPECT_TRUE(j["partition"]["memory_proportional"]["fits"]);
  EXPECT_EQ(j["manifest"]["files"][0]["header_fnv1a64"], "0x0123456789abcdef");
  EXPECT_EQ(j["manifest"]["weights"][1]["transform"], "Concat");
  EXPECT_EQ(j["manifest"]["weights"][1]["sources"][1]["shape"], nlohmann::json::array({32, 64}));
  EXPECT_EQ(j["manifest"]["weights"][0]["shard_axis"], -1);

  const nlohmann::json &bin = j["kernels"][0]["binaries"][0];
  EXPECT_EQ(bin["arch"], "sm_86");
  EXPECT_EQ(bin["cubin"]["bytes"], 6);
  EXPECT_EQ(bin["cubin"]["fnv1a64"], "0x85944171f73967e8");
  EXPECT_EQ(bin["ptx"]["bytes"], 27);
  EXPECT_EQ(j["kernels"][1]["binaries"][0]["cubin"]["bytes"], 0);
  EXPECT_EQ(j["kernels"][0]["source_hash"], "0xfeedfacecafebeef");
  EXPECT_EQ(text.find("foobar"), std::string::npos); // bytes never shown

  const nlohmann::json &decode = j["buckets"][0];
  EXPECT_EQ(decode["devices"][0]["buffers"][2], nlohmann::json({{"offset", 1024}, {"bytes", 1024}}));
  EXPECT_EQ(decode["steps"][0]["op_type"], "Launch");
  EXPECT_EQ(decode["steps"][0]["op"]["args"][0]["kind"], "Input");
  EXPECT_EQ(decode["steps"][0]["op"]["args"][0]["input"], "TokenIds");
  EXPECT_EQ(decode["steps"][2]["op"]["block"], nlohmann::json::array({32, 4, 1}));
  EXPECT_EQ(decode["steps"][3]["op_type"], "Copy");
  EXPECT_EQ(decode["steps"][3]["op"]["bytes"], 128);
  EXPECT_EQ(decode["steps"][4]["op"]["residual"]["kind"], "Buffer");
  EXPECT_TRUE(decode["steps"][4]["op"]["bias"].is_null());
  EXPECT_EQ(j["buckets"][1]["steps"][2]["op"]["devices"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["kv_cache"]["blocks_per_device"], nlohmann::json::array({128, 96}));
  EXPECT_EQ(j["tokenizer_json"]["bytes"], 17);
  EXPECT_EQ(j["generation_config_json"], "{\"eos_token_id\":2}");

  // Every Plan field, in schema order (the parsed object sorts its keys,
  // so look at the text).
  EXPECT_EQ(j.size(), 15u);
  EXPECT_EQ(j["seal"]["blake2b_256"].get<std::string>().size(), 64u);
  EXPECT_TRUE(j["seal"]["signer"].is_null());
  EXPECT_LT(text.find("\"version\""), text.find("\"compiler\""));
  EXPECT_LT(text.find("\"kv_cache\""), text.find("\"tokenizer_json\""));
  EXPECT_LT(text.find("\"generation_config_json\""), text.find("\"chat_template\""));
  EXPECT_LT(text.find("\"chat_template\""), text.find("\"eos_token\""));
}

// weft-inspect --json mirrors plan.fbs by hand: every field of every table
// must appear in it (under its own name, or the renaming listed here), so a
// field added to the schema without its JSON fails here.
TEST(PlanJson, RendersEveryFieldOfTheSchema) {
  std::ifstream in(WEFT_PLAN_SCHEMA);
  ASSERT_TRUE(in.good()) << WEFT_PLAN_SCHEMA;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string schema = ss.str();
  // table NAME { field: type; ... }
  std::vector<std::pair<std::string, std::string>> fields; // table, field
  std::regex table(R"(\ntable\s+(\w+)\s*\{([^}]*)\})");
  std::regex field(R"(^\s*(\w+)\s*:)");
  for (std::sregex_iterator t(schema.begin(), schema.end(), table), end; t != end; ++t) {
    std::string body = (*t)[2];
    std::stringstream lines(body);
    std::string line;
    while (std::getline(lines, line)) {
      line = line.substr(0, line.find("//"));
      std::smatch m;
      if (std::regex_search(line, m, field))
        fields.push_back({(*t)[1], m[1]});
    }
  }
  ASSERT_GT(fields.size(), 100u);

  std::set<std::string> keys;
  std::function<void(const nlohmann::json &)> collect = [&](const nlohmann::json &j) {
    if (j.is_object())
      for (auto it = j.begin(); it != j.end(); ++it) {
        keys.insert(it.key());
        collect(it.value());
      }
    else if (j.is_array())
      for (const nlohmann::json &e : j)
        collect(e);
  };
  fb::PlanT predicted = tinyPlan();
  auto prediction = std::make_unique<fb::StepPredictionT>();
  prediction->context = 64;
  predicted.buckets[0]->predictions.push_back(std::move(prediction));
  for (const fb::PlanT &p : {std::move(predicted), tensorParallelPlan()}) {
    auto file = load(planBytes(p));
    ASSERT_TRUE(file.isOk()) << file.status().message();
    collect(nlohmann::json::parse(planToJson(file->plan())));
  }
  // Fields the JSON shows under another name, or folds into another key.
  const std::map<std::string, std::string> renamed = {
      {"Seal.hash", "blake2b_256"},
      {"KernelBinary.cubin", "cubin"},
      {"Plan.tokenizer_json", "tokenizer_json"},
      {"Step.op", "op_type"},
  };
  for (const auto &[t, f] : fields) {
    auto r = renamed.find(t + "." + f);
    std::string key = r == renamed.end() ? f : r->second;
    EXPECT_TRUE(keys.count(key)) << t << "." << f << " is not in weft-inspect --json";
  }
}

TEST(PlanJson, SummaryNamesTheKeyFacts) {
  auto file = load(tinyBytes());
  ASSERT_TRUE(file.isOk()) << file.status().message();
  const std::string s = planSummary(file->plan());
  for (const char *fact : {
           "plan: format version 5, compiled by weft-compile test",
           "seal: BLAKE2b-256 checksum, unsigned",
           "model: tiny-llama (LlamaForCausalLM), BF16, 2 layers, hidden 64",
           "topology: rtx3090+rtx3060, 2 devices, 1 link, host RAM 64.0 GiB",
           "device 1: rtx3060, sm_86 (cc 86), 28 SMs, 12.0 GiB (capped at 10.0 GiB), 360.0 GB/s",
           "link 0-1: pcie, 16.0 GB/s, 10.0 us",
           "partition: objective latency, batch 1, context 512, weights bf16, 2 stages",
           "stage 0: devices [0], layers [0, 1)",
           "stage 1: devices [1], layers [1, 2)",
           "chosen: pipeline rtx3090[0,1) | rtx3060[1,2): fits, 1.250 ms/token",
           "runner-up 1: single rtx3090: fits, 1.500 ms/token",
           "memory-proportional baseline: memory-proportional split: fits, 1.400 ms/token",
           // 256x64 + 128x64 BF16 on device 0; 64x128 + 256x64 on device 1.
           "device 0 (rtx3090): weights 48.0 KiB in 2 tensors, KV cache 128 blocks of 16 tokens",
           "device 1 (rtx3060): weights 48.0 KiB in 2 tensors, KV cache 96 blocks of 16 tokens",
           "arena peak: decode_b1 4.0 KiB, prefill_c16 8.0 KiB",
           "kernels: 5, architectures sm_86, cubin 6 B, PTX",
           "0 weft_rms_norm_linear_0 (rms_norm_linear): sm_86 cubin 6 B PTX 27 B",
           "1 weft_attention_0 (attention): sm_86 PTX",
           "buckets: 2",
           "decode_b1: decode, 1 token, 7 steps (3 Launch, 3 Gemm, 1 Copy, 0 AllReduce)",
           "prefill_c16: prefill, 16 tokens, 4 steps (1 Launch, 1 Gemm, 1 Copy, 1 AllReduce)",
       })
    EXPECT_NE(s.find(fact), std::string::npos) << "missing: " << fact << "\n" << s;
}

//===----------------------------------------------------------------------===//
// Files and bytes
//===----------------------------------------------------------------------===//

TEST(PlanReader, RejectsMissingFile) {
  auto file = PlanFile::open("/nonexistent/dir/model.weft");
  ASSERT_TRUE(oneLineError(file, "/nonexistent/dir/model.weft: cannot open ("));
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("expected an existing plan file"), std::string::npos);
}

TEST(PlanReader, RejectsDirectory) {
  TempDir dir;
  auto file = PlanFile::open(dir.path());
  ASSERT_TRUE(oneLineError(file, dir.path() + ": is a directory: expected a plan file"));
}

TEST(PlanReader, RejectsTooSmall) {
  for (size_t size : {0, 1, 4, 7}) {
    auto file = load(std::vector<uint8_t>(size, 0));
    EXPECT_TRUE(oneLineError(file, "plan.weft: plan is " + std::to_string(size) +
                                       " bytes: expected at least 8"));
  }
  TempDir dir;
  writeFile(dir.file("empty.weft"), "");
  EXPECT_TRUE(oneLineError(PlanFile::open(dir.file("empty.weft")),
                           dir.file("empty.weft") + ": plan is 0 bytes: expected at least 8"));
}

// A sparse file: the size is rejected before anything is read.
TEST(PlanReader, RejectsTooLarge) {
  TempDir dir;
  const std::string path = dir.file("huge.weft");
  writeFile(path, "");
  std::filesystem::resize_file(path, uint64_t(1) << 31);
  EXPECT_TRUE(oneLineError(PlanFile::open(path),
                           path + ": plan is 2147483648 bytes: expected less than 2 GiB"));
}

TEST(PlanReader, RejectsWrongIdentifier) {
  std::vector<uint8_t> bytes = tinyBytes();
  std::memcpy(bytes.data() + 4, "ABCD", 4);
  auto file = load(bytes);
  ASSERT_TRUE(oneLineError(file, "plan.weft: not a Weft plan (identifier 'ABCD', expected 'WEFT')"));
  EXPECT_EQ(file.status().message(),
            "plan.weft: not a Weft plan (identifier 'ABCD', expected 'WEFT')");

  // Text, and identifiers that are not printable.
  std::string text = "hello, this is not a plan\n";
  EXPECT_TRUE(oneLineError(load(std::vector<uint8_t>(text.begin(), text.end())),
                           "plan.weft: not a Weft plan (identifier 'o, t', expected 'WEFT')"));
  std::memcpy(bytes.data() + 4, "\n\0\xff" "W", 4);
  EXPECT_TRUE(oneLineError(load(bytes), "plan.weft: not a Weft plan (identifier '\\x0a\\x00\\xffW'"));
}

TEST(PlanReader, RejectsTruncation) {
  const std::vector<uint8_t> bytes = tinyBytes();
  const std::string corrupt = "plan.weft: corrupt or truncated plan (FlatBuffers verification failed)";
  for (size_t size : {size_t(8), size_t(9), size_t(16), size_t(100), bytes.size() / 2,
                      bytes.size() - 64, bytes.size() - 8}) {
    auto file = load(std::vector<uint8_t>(bytes.begin(), bytes.begin() + size));
    EXPECT_TRUE(oneLineError(file, corrupt)) << "at " << size;
    if (!file.isOk())
      EXPECT_EQ(file.status().message(), corrupt);
  }
  // Every cut fails; the builder pads the last object to 4 bytes, and
  // dropping only padding loses nothing.
  for (size_t size = 8; size + 4 <= bytes.size(); ++size)
    EXPECT_FALSE(load(std::vector<uint8_t>(bytes.begin(), bytes.begin() + size)).isOk())
        << "at " << size;
}

TEST(PlanReader, RejectsBytesThatBreakVerification) {
  const std::vector<uint8_t> good = tinyBytes();
  const fb::Plan *plan = fb::GetPlan(good.data());
  const std::string corrupt = "plan.weft: corrupt or truncated plan (FlatBuffers verification failed)";
  struct Damage {
    const char *what;
    size_t at;
    uint32_t value;
  } damages[] = {
      {"root offset past the end", 0, 0x7ffffff0u},
      {"root offset into the identifier", 0, 4},
      {"root table's vtable offset", offsetIn(good, plan), 0x40000000u},
      {"buckets vector length", offsetIn(good, plan->buckets()), 0x10000000u},
      {"model name length", offsetIn(good, plan->model()->name()), 0xfffffff0u},
      {"cubin length", offsetIn(good, plan->kernels()->Get(0)->binaries()->Get(0)->cubin()),
       0x00ffffffu},
      {"a step's op offset",
       fieldOffset(good, plan->buckets()->Get(0)->steps()->Get(0), fb::Step::VT_OP), 0x7fff0000u},
  };
  for (const Damage &d : damages) {
    std::vector<uint8_t> bytes = good;
    put32(bytes, d.at, d.value);
    auto file = load(bytes);
    EXPECT_TRUE(oneLineError(file, corrupt)) << d.what;
    if (!file.isOk())
      EXPECT_EQ(file.status().message(), corrupt) << d.what;
  }
}

// Whatever a single damaged byte does, the result is a plan or one line.
TEST(PlanReader, SurvivesEveryFlippedByte) {
  const std::vector<uint8_t> good = tinyBytes();
  size_t accepted = 0;
  for (size_t i = 0; i < good.size(); ++i)
    for (uint8_t mask : {uint8_t(0xff), uint8_t(0x80), uint8_t(0x01)}) {
      std::vector<uint8_t> bytes = good;
      bytes[i] ^= mask;
      auto file = load(bytes);
      if (file.isOk()) {
        ++accepted;
        EXPECT_FALSE(planToJson(file->plan()).empty());
        EXPECT_FALSE(planSummary(file->plan()).empty());
      } else {
        EXPECT_TRUE(oneLineError(file, "plan.weft: ")) << "byte " << i;
      }
    }
  // Many bytes are string contents or doubles, which any value satisfies.
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, good.size() * 3);
}

TEST(PlanReader, RejectsOtherVersions) {
  for (uint32_t version : {0u, 1u, 2u, 3u, 4u, 0xffffffffu}) {
    fb::PlanT plan = tinyPlan();
    plan.version = version;
    auto file = load(planBytes(plan));
    ASSERT_TRUE(oneLineError(file, "plan.weft: version " + std::to_string(version) +
                                       ": expected 5 (the plan format this runtime reads"));
    EXPECT_EQ(file.status().code(), StatusCode::kUnimplemented);
  }
}

TEST(PlanReader, BucketPredictionsAreCheckedAndOptional) {
  auto prediction = [](int context, double seconds) {
    auto p = std::make_unique<fb::StepPredictionT>();
    p->context = context;
    p->seconds = seconds;
    p->raw_other_seconds = seconds * 0.9;
    p->raw_attention_seconds = seconds * 0.1;
    return p;
  };
  {
    fb::PlanT plan = tinyPlan();
    plan.buckets[0]->predictions.push_back(prediction(64, 0.004));
    plan.buckets[0]->predictions.push_back(prediction(128, 0.0041));
    auto file = load(planBytes(plan));
    ASSERT_TRUE(file.isOk()) << file.status().message();
  }
  {
    fb::PlanT plan = tinyPlan();
    plan.buckets[0]->predictions.push_back(prediction(128, 0.004));
    plan.buckets[0]->predictions.push_back(prediction(64, 0.004));
    EXPECT_TRUE(oneLineError(load(planBytes(plan)),
                             "plan.weft: buckets[0].predictions[1].context: expected contexts >= 0 "
                             "in ascending order, got 64"));
  }
  {
    fb::PlanT plan = tinyPlan();
    plan.buckets[0]->predictions.push_back(prediction(64, std::nan("")));
    EXPECT_TRUE(oneLineError(load(planBytes(plan)),
                             "plan.weft: buckets[0].predictions[0].seconds: expected seconds from 0 "
                             "to 3600"));
  }
}

TEST(PlanReader, GemmOperandsHaveTheirKinds) {
  // An input in the weight's place (B), a buffer too small to hold B (a
  // quantized projection expanded to 16 bits goes there), a weight as C,
  // and a weight stored in another dtype than the GEMM reads are refused,
  // even in a plan sealed after the change.
  {
    fb::PlanT plan = tinyPlan();
    plan.buckets[0]->steps[1]->op.AsGemm()->b = inputArg(fb::InputKind::TokenIds);
    ASSERT_TRUE(oneLineError(load(planBytes(plan)),
                             "plan.weft: buckets[0].steps[1].op.b: kind Input: expected a Weight "
                             "or a Buffer"));
  }
  {
    fb::PlanT plan = tinyPlan();
    plan.buckets[0]->steps[1]->op.AsGemm()->b = bufferArg(0);
    ASSERT_TRUE(oneLineError(load(planBytes(plan)),
                             "plan.weft: buckets[0].steps[1].op.b: buffer 0 on device 0 holds 256 "
                             "bytes from offset 0: expected at least 16384 for this operand"));
  }
  {
    fb::PlanT plan = tinyPlan();
    plan.buckets[0]->steps[1]->op.AsGemm()->c = weightArg(1);
    ASSERT_TRUE(oneLineError(load(planBytes(plan)),
                             "plan.weft: buckets[0].steps[1].op.c: kind Weight: expected a "
                             "Buffer or an Input"));
  }
  {
    fb::PlanT plan = tinyPlan();
    plan.manifest->weights[1]->dtype = fb::DType::F32;
    auto file = load(planBytes(plan));
    ASSERT_FALSE(file.isOk());
    EXPECT_NE(file.status().message().find("is F32: expected the GEMM's BF16"), std::string::npos)
        << file.status().message();
  }
}

TEST(PlanReader, RejectsUnknownOpType) {
  std::vector<uint8_t> bytes = tinyBytes();
  const fb::Step *step = fb::GetPlan(bytes.data())->buckets()->Get(0)->steps()->Get(1);
  bytes[fieldOffset(bytes, step, fb::Step::VT_OP_TYPE)] = 9;
  ASSERT_TRUE(sealPlan(bytes, nullptr).isOk()); // past the checksum, to the rule
  auto file = load(bytes);
  ASSERT_TRUE(oneLineError(file, "plan.weft: buckets[0].steps[1].op_type: unknown op type 9: "
                                 "expected Launch, Gemm, Copy or AllReduce"));
}

// The verifier accepts a [long] vector whose data is only 4-byte aligned;
// reading it would be undefined behaviour, so the reader rejects it.
TEST(PlanReader, RejectsMisalignedLongVector) {
  fb::PlanT plan = tinyPlan();
  plan.manifest->weights[0]->shape = {1, 64};
  plan.manifest->weights[0]->sources[0]->shape = {1, 64};
  plan.kernels[0]->params[1]->bytes = 128; // the kernels reading it read less
  plan.kernels[3]->params[3]->bytes = 128;
  std::vector<uint8_t> bytes = planBytes(plan);
  ASSERT_TRUE(load(bytes).isOk());
  // Point the field 4 bytes further: the length becomes element 0's low
  // half (1), and the data starts 4 bytes off an 8-byte boundary.
  const fb::Weight *w = fb::GetPlan(bytes.data())->manifest()->weights()->Get(0);
  const size_t at = fieldOffset(bytes, w, fb::Weight::VT_SHAPE);
  uint32_t offset;
  std::memcpy(&offset, bytes.data() + at, 4);
  put32(bytes, at, offset + 4);
  ASSERT_TRUE(sealPlan(bytes, nullptr).isOk()); // past the checksum, to the rule
  auto file = load(bytes);
  ASSERT_TRUE(oneLineError(file, "plan.weft: manifest.weights[0].shape: [long] data at byte "));
  EXPECT_NE(file.status().message().find("is not 8-byte aligned"), std::string::npos);
}

TEST(PlanSeal, ChecksumCatchesAnyChangedByte) {
  std::vector<uint8_t> bytes = tinyBytes();
  ASSERT_TRUE(load(bytes).isOk());
  // One flipped bit in a kernel's PTX: structurally fine, caught by the hash.
  const auto *ptx = fb::GetPlan(bytes.data())->kernels()->Get(0)->binaries()->Get(0)->ptx();
  bytes[size_t(reinterpret_cast<const uint8_t *>(ptx->data()) - bytes.data())] ^= 0x20;
  auto file = load(bytes);
  ASSERT_TRUE(oneLineError(file, "plan.weft: checksum mismatch (BLAKE2b-256 "));
  EXPECT_NE(file.status().message().find("changed or damaged after it was compiled"),
            std::string::npos);
  // A plan without a seal is refused, not trusted.
  fb::PlanT unsealed = tinyPlan();
  unsealed.seal.reset();
  ASSERT_TRUE(oneLineError(load(planBytes(unsealed)), "plan.weft: the plan has no seal"));
}

TEST(PlanSeal, SignedPlansAndTrustedKeys) {
  StatusOr<SigningKey> mine = generateSigningKey(), other = generateSigningKey();
  ASSERT_TRUE(mine.isOk() && other.isOk());
  std::vector<uint8_t> signedBytes = planBytes(tinyPlan(), &*mine);
  std::vector<uint8_t> unsignedBytes = tinyBytes();
  SealPolicy trustMine;
  trustMine.trusted = {mine->publicKey};
  // Any sealed plan loads without a policy; a trusted signer with one.
  EXPECT_TRUE(load(signedBytes).isOk());
  EXPECT_TRUE(PlanFile::fromBytes(signedBytes, kName, trustMine).isOk());
  EXPECT_TRUE(oneLineError(PlanFile::fromBytes(unsignedBytes, kName, trustMine),
                           "plan.weft: the plan is not signed"));
  SealPolicy trustOther;
  trustOther.trusted = {other->publicKey};
  auto untrusted = PlanFile::fromBytes(signedBytes, kName, trustOther);
  ASSERT_TRUE(oneLineError(untrusted, "plan.weft: signed by " +
                                          toHex(mine->publicKey.data(), 32) +
                                          ", which is not a trusted key"));
  // A signature that does not verify: the hash is made to match again
  // after a change, but the signature cannot be.
  std::vector<uint8_t> forged = signedBytes;
  const fb::Seal *seal = fb::GetPlan(forged.data())->seal();
  forged[size_t(seal->signature()->data() - forged.data())] ^= 1;
  ASSERT_TRUE(oneLineError(PlanFile::fromBytes(forged, kName, trustMine),
                           "plan.weft: the signature does not verify"));
  // Keys round-trip through their files.
  TempDir dir;
  ASSERT_TRUE(writeSigningKey(dir.file("k"), *mine).isOk());
  StatusOr<SigningKey> read = readSigningKey(dir.file("k"));
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(read->publicKey, mine->publicKey);
  StatusOr<std::vector<PublicKey>> keys = readTrustedKeys(dir.file("k.pub"));
  ASSERT_TRUE(keys.isOk()) << keys.status().message();
  EXPECT_EQ(keys->at(0), mine->publicKey);
  writeFile(dir.file("bad.pub"), "# trusted\nnot-hex\n");
  EXPECT_EQ(readTrustedKeys(dir.file("bad.pub")).status().message(),
            dir.file("bad.pub") + ":2: expected an ed25519 public key as 64 hex digits");
}

TEST(PlanReader, NamesTheDisplayNameSafely) {
  auto file = PlanFile::fromBytes({}, "bad\nname.weft");
  ASSERT_TRUE(oneLineError(file, "bad\\x0aname.weft: plan is 0 bytes"));
}

//===----------------------------------------------------------------------===//
// Semantic checks: one case per rule
//===----------------------------------------------------------------------===//

struct Rejection {
  const char *name;
  std::function<void(fb::PlanT &)> damage;
  std::string path;  // the field named after "plan.weft: "
  std::string what;  // found in the rest of the line
};

void PrintTo(const Rejection &r, std::ostream *os) { *os << r.name; }

class PlanRejects : public ::testing::TestWithParam<Rejection> {};

TEST_P(PlanRejects, WithOneLineNamingThePath) {
  const Rejection &r = GetParam();
  fb::PlanT plan = tinyPlan();
  r.damage(plan);
  auto file = load(planBytes(plan));
  ASSERT_TRUE(oneLineError(file, std::string(kName) + ": " + r.path + ": "));
  EXPECT_NE(file.status().message().find(r.what), std::string::npos)
      << file.status().message();
  EXPECT_EQ(file.status().code(), StatusCode::kInvalidArgument);
}

fb::LaunchT &launch(fb::PlanT &p, int bucket, int step) {
  return *p.buckets[bucket]->steps[step]->op.AsLaunch();
}
fb::GemmT &gemm(fb::PlanT &p, int bucket, int step) {
  return *p.buckets[bucket]->steps[step]->op.AsGemm();
}
fb::CopyT &copy(fb::PlanT &p, int bucket, int step) {
  return *p.buckets[bucket]->steps[step]->op.AsCopy();
}
fb::AllReduceT &allReduce(fb::PlanT &p) { return *p.buckets[1]->steps[2]->op.AsAllReduce(); }
fb::WeightT &weight(fb::PlanT &p, int i) { return *p.manifest->weights[i]; }

const int64_t kBig = int64_t(1) << 40;

const Rejection kRejections[] = {
    // Model.
    {"MissingModel", [](fb::PlanT &p) { p.model.reset(); }, "model",
     "missing: expected a ModelInfo table"},
    {"ZeroLayers", [](fb::PlanT &p) { p.model->num_layers = 0; }, "model.num_layers",
     "0 is not positive: expected at least 1"},
    {"NegativeVocab", [](fb::PlanT &p) { p.model->vocab_size = -5; }, "model.vocab_size",
     "-5 is not positive"},
    {"UnknownModelDType", [](fb::PlanT &p) { p.model->dtype = fb::DType(42); }, "model.dtype",
     "unknown dtype 42: expected 0 (F32) to 7 (I64)"},
    {"EosOutOfVocab", [](fb::PlanT &p) { p.model->eos_token_ids = {2, 256}; },
     "model.eos_token_ids[1]", "token 256 out of range (vocab_size 256)"},
    {"BosOutOfVocab", [](fb::PlanT &p) { p.model->bos_token_id = -2; }, "model.bos_token_id",
     "token -2 out of range"},
    // Topology.
    {"MissingTopology", [](fb::PlanT &p) { p.topology.reset(); }, "topology", "missing"},
    {"NoDevices", [](fb::PlanT &p) { p.topology->devices.clear(); }, "topology.devices",
     "empty: expected at least one device"},
    {"BadComputeCapability",
     [](fb::PlanT &p) { p.topology->devices[1]->compute_capability = 0; },
     "topology.devices[1].compute_capability", "0 is not positive"},
    {"LinkDeviceOutOfRange", [](fb::PlanT &p) { p.topology->links[0]->b = 5; },
     "topology.links[0].b", "device 5 out of range (topology has 2 devices)"},
    {"LinkToItself", [](fb::PlanT &p) { p.topology->links[0]->b = 0; }, "topology.links[0]",
     "links device 0 to itself"},
    // Partition.
    {"MissingPartition", [](fb::PlanT &p) { p.partition.reset(); }, "partition", "missing"},
    {"NoStages", [](fb::PlanT &p) { p.partition->stages.clear(); }, "partition.stages",
     "empty: expected stages covering layers [0, 2)"},
    {"StageGap",
     [](fb::PlanT &p) {
       p.model->num_layers = 3;
       p.partition->stages[1]->first_layer = 2;
       p.partition->stages[1]->end_layer = 3;
     },
     "partition.stages[1].first_layer",
     "first_layer 2 leaves layers [1, 2) in no stage: expected 1 (stages[0].end_layer)"},
    {"StageOverlap", [](fb::PlanT &p) { p.partition->stages[1]->first_layer = 0; },
     "partition.stages[1].first_layer",
     "first_layer 0 overlaps stages[0], which ends at layer 1: expected 1"},
    {"FirstStageNotAtZero",
     [](fb::PlanT &p) { p.partition->stages.erase(p.partition->stages.begin()); },
     "partition.stages[0].first_layer", "first_layer 1: expected 0"},
    {"StagesEndEarly", [](fb::PlanT &p) { p.partition->stages.pop_back(); }, "partition.stages",
     "the last stage ends at layer 1: expected the stages to cover layers [0, 2)"},
    {"StagePastLastLayer", [](fb::PlanT &p) { p.partition->stages[1]->end_layer = 3; },
     "partition.stages[1].end_layer", "end_layer 3 is past the model's 2 layers"},
    {"EmptyStage", [](fb::PlanT &p) { p.partition->stages[1]->end_layer = 1; },
     "partition.stages[1].end_layer", "end_layer 1: expected more than first_layer 1"},
    {"StageDeviceOutOfRange", [](fb::PlanT &p) { p.partition->stages[1]->devices = {2}; },
     "partition.stages[1].devices[0]", "device 2 out of range (topology has 2 devices)"},
    {"StageWithoutDevices", [](fb::PlanT &p) { p.partition->stages[0]->devices.clear(); },
     "partition.stages[0].devices", "empty: expected at least one device"},
    {"StageDeviceTwice", [](fb::PlanT &p) { p.partition->stages[0]->devices = {0, 0}; },
     "partition.stages[0].devices[1]", "device 0 appears twice"},
    {"TooManyOffloaded", [](fb::PlanT &p) { p.partition->stages[0]->offloaded_layers = 2; },
     "partition.stages[0].offloaded_layers", "2: expected 0 to 1"},
    {"ZeroBatch", [](fb::PlanT &p) { p.partition->batch = 0; }, "partition.batch",
     "0 is not positive"},
    // Manifest: files.
    {"MissingManifest", [](fb::PlanT &p) { p.manifest.reset(); }, "manifest", "missing"},
    {"SourceFileEscapes", [](fb::PlanT &p) { p.manifest->files[0]->file = "../../etc/passwd"; },
     "manifest.files[0].file", "'../../etc/passwd' is not a plain relative path"},
    {"SourceFileAbsolute", [](fb::PlanT &p) { p.manifest->files[0]->file = "/x.safetensors"; },
     "manifest.files[0].file", "is not a plain relative path"},
    {"SourceFileUnnamed", [](fb::PlanT &p) { p.manifest->files[0]->file.clear(); },
     "manifest.files[0].file", "empty"},
    {"HeaderPastFile", [](fb::PlanT &p) { p.manifest->files[0]->header_size = 199993; },
     "manifest.files[0].header_size", "exceed file_size 200000"},
    // Manifest: weights.
    {"WeightWithoutSource", [](fb::PlanT &p) { weight(p, 0).sources.clear(); },
     "manifest.weights[0].sources", "empty: expected at least one source tensor"},
    {"NegativeDim",
     [](fb::PlanT &p) {
       weight(p, 0).shape = {-1, 64};
     },
     "manifest.weights[0].shape", "[-1, 64] has dim 0 = -1: expected non-negative sizes"},
    {"ElementCountOverflows", [](fb::PlanT &p) { weight(p, 0).shape = {kBig, kBig}; },
     "manifest.weights[0].shape", "has more elements than fit in 63 bits"},
    {"ByteCountOverflows",
     [](fb::PlanT &p) {
       weight(p, 0).dtype = fb::DType::F32;
       weight(p, 0).shape = {int64_t(1) << 31, int64_t(1) << 31};
     },
     "manifest.weights[0].shape", "of F32 takes more bytes than fit in 64 bits"},
    {"RankTooHigh", [](fb::PlanT &p) { weight(p, 0).shape.assign(17, 1); },
     "manifest.weights[0].shape", "rank 17: expected at most 16"},
    {"UnnamedWeight", [](fb::PlanT &p) { weight(p, 2).name.clear(); },
     "manifest.weights[2].name", "empty"},
    {"UnknownTransform", [](fb::PlanT &p) { weight(p, 0).transform = fb::Transform(7); },
     "manifest.weights[0].transform", "unknown transform 7"},
    {"PlainWeightTwoSources",
     [](fb::PlanT &p) { weight(p, 0).sources.push_back(sourceTensor("x", 0, {256, 64})); },
     "manifest.weights[0].sources", "2 sources for transform None: expected exactly one"},
    {"PlainWeightShapeDiffers", [](fb::PlanT &p) { weight(p, 0).sources[0]->shape = {64, 256}; },
     "manifest.weights[0].sources[0].shape",
     "[64, 256] differs from the weight's shape [256, 64]"},
    {"ConcatDisagreesOutsideAxis",
     [](fb::PlanT &p) { weight(p, 1).sources[1]->shape = {32, 65}; },
     "manifest.weights[1].sources[1].shape",
     "[32, 65] differs from the weight's shape [128, 64] in dim 1: expected equal sizes "
     "outside concat_axis 0"},
    {"ConcatDoesNotAddUp", [](fb::PlanT &p) { weight(p, 1).sources[2]->shape = {16, 64}; },
     "manifest.weights[1].sources",
     "sizes along concat_axis 0 add up to 112: expected shape[0] = 128"},
    {"ConcatRankDiffers", [](fb::PlanT &p) { weight(p, 1).sources[0]->shape = {64, 64, 1}; },
     "manifest.weights[1].sources[0].shape", "has rank 3: expected rank 2"},
    {"ConcatAxisOutOfRange", [](fb::PlanT &p) { weight(p, 1).concat_axis = 2; },
     "manifest.weights[1].concat_axis", "2 out of range for shape [128, 64]"},
    {"SourceFileIndexOutOfRange", [](fb::PlanT &p) { weight(p, 1).sources[2]->file = 1; },
     "manifest.weights[1].sources[2].file",
     "file index 1 out of range (manifest has 1 file): expected -1 (builtin model)"},
    {"SourceFileIndexNegative", [](fb::PlanT &p) { weight(p, 0).sources[0]->file = -2; },
     "manifest.weights[0].sources[0].file", "file index -2 out of range"},
    {"SourceUnnamed", [](fb::PlanT &p) { weight(p, 0).sources[0]->name.clear(); },
     "manifest.weights[0].sources[0].name", "empty"},
    {"SourceUnknownDType", [](fb::PlanT &p) { weight(p, 0).sources[0]->dtype = fb::DType(-1); },
     "manifest.weights[0].sources[0].dtype", "unknown dtype -1"},
    {"WeightDeviceOutOfRange", [](fb::PlanT &p) { weight(p, 3).devices = {3}; },
     "manifest.weights[3].devices[0]", "device 3 out of range (topology has 2 devices)"},
    {"WeightWithoutDevices", [](fb::PlanT &p) { weight(p, 3).devices.clear(); },
     "manifest.weights[3].devices", "empty"},
    {"ShardsWithoutDevices",
     [](fb::PlanT &p) {
       weight(p, 3).shard_axis = 0;
       weight(p, 3).shard_parts = 2;
     },
     "manifest.weights[3].devices", "1 devices for 2 shards: expected one device per shard"},
    {"ShardsDoNotDivide",
     [](fb::PlanT &p) {
       weight(p, 3).shard_axis = 1;
       weight(p, 3).shard_parts = 3;
     },
     "manifest.weights[3].shard_parts", "3 does not divide shape[1] = 64"},
    {"ShardAxisOutOfRange", [](fb::PlanT &p) { weight(p, 3).shard_axis = 2; },
     "manifest.weights[3].shard_axis", "2 out of range for shape [256, 64]"},
    {"PartsWithoutAxis", [](fb::PlanT &p) { weight(p, 3).shard_parts = 2; },
     "manifest.weights[3].shard_parts", "2 with shard_axis -1: expected 1"},
    // Kernels.
    {"KernelWithoutBinaries", [](fb::PlanT &p) { p.kernels[1]->binaries.clear(); },
     "kernels[1].binaries", "empty: expected at least one cubin or PTX"},
    {"BinaryWithoutCode", [](fb::PlanT &p) { p.kernels[1]->binaries[0]->ptx.clear(); },
     "kernels[1].binaries[0]", "neither cubin nor ptx: expected a non-empty cubin or PTX"},
    {"BinaryWithoutArch", [](fb::PlanT &p) { p.kernels[0]->binaries[0]->arch.clear(); },
     "kernels[0].binaries[0].arch", "empty"},
    {"UnnamedKernel", [](fb::PlanT &p) { p.kernels[0]->name.clear(); }, "kernels[0].name",
     "empty: expected the kernel's name"},
    {"KernelSymbolNotASymbol", [](fb::PlanT &p) { p.kernels[0]->symbol = "_Z3foo v;rm"; },
     "kernels[0].symbol",
     "'_Z3foo v;rm': expected the entry's symbol (letters, digits, _, $ and ., at most 65536 "
     "bytes)"},
    {"KernelSymbolTooLong",
     [](fb::PlanT &p) { p.kernels[0]->symbol = "_Z" + std::string(65535, 'a'); },
     "kernels[0].symbol", "at most 65536 bytes"},
    // KV cache.
    {"MissingKvCache", [](fb::PlanT &p) { p.kv_cache.reset(); }, "kv_cache", "missing"},
    {"KvHeadsPerDeviceCount", [](fb::PlanT &p) { p.kv_cache->kv_heads_per_device = {2}; },
     "kv_cache.kv_heads_per_device", "1 entries: expected one per topology device (2)"},
    {"KvHeadsNotDivisor", [](fb::PlanT &p) { p.kv_cache->kv_heads_per_device = {2, 3}; },
     "kv_cache.kv_heads_per_device[1]", "3 KV heads on device 1: expected a divisor of 2"},
    {"ZeroBlockTokens", [](fb::PlanT &p) { p.kv_cache->block_tokens = 0; },
     "kv_cache.block_tokens", "0 is not positive"},
    {"ZeroHeadDim", [](fb::PlanT &p) { p.kv_cache->head_dim = 0; }, "kv_cache.head_dim",
     "0 is not positive"},
    {"ZeroMaxSequences", [](fb::PlanT &p) { p.kv_cache->max_sequences = -1; },
     "kv_cache.max_sequences", "-1 is not positive"},
    {"BlocksPerDeviceCount", [](fb::PlanT &p) { p.kv_cache->blocks_per_device = {128}; },
     "kv_cache.blocks_per_device", "1 entries: expected one per topology device (2)"},
    {"NoBlocksForAStage", [](fb::PlanT &p) { p.kv_cache->blocks_per_device = {128, 0}; },
     "kv_cache.blocks_per_device[1]", "0 blocks on device 1, which runs a stage"},
    {"NegativeBlocks", [](fb::PlanT &p) { p.kv_cache->blocks_per_device = {-1, 96}; },
     "kv_cache.blocks_per_device[0]", "-1 blocks on device 0"},
    // Buckets and buffers.
    {"NoBuckets", [](fb::PlanT &p) { p.buckets.clear(); }, "buckets",
     "empty: expected at least one bucket"},
    {"ZeroTokens", [](fb::PlanT &p) { p.buckets[1]->tokens = 0; }, "buckets[1].tokens",
     "0 is not positive"},
    {"DuplicateBucketName", [](fb::PlanT &p) { p.buckets[1]->name = "decode_b1"; },
     "buckets[1].name", "'decode_b1' names an earlier bucket too"},
    {"BucketWithoutSteps", [](fb::PlanT &p) { p.buckets[1]->steps.clear(); }, "buckets[1].steps",
     "empty: expected at least one step"},
    {"BuffersDeviceOutOfRange", [](fb::PlanT &p) { p.buckets[0]->devices[1]->device = 2; },
     "buckets[0].devices[1].device", "device 2 out of range"},
    {"BuffersDeviceTwice", [](fb::PlanT &p) { p.buckets[0]->devices[1]->device = 0; },
     "buckets[0].devices[1].device", "device 0 has a second entry"},
    {"BufferPastArena", [](fb::PlanT &p) { p.buckets[0]->devices[0]->buffers[2]->bytes = 3073; },
     "buckets[0].devices[0].buffers[2]",
     "bytes [1024, 4097) end past arena_bytes 4096: expected a range inside the device's arena"},
    {"BufferOverflows",
     [](fb::PlanT &p) {
       p.buckets[0]->devices[0]->buffers[1]->offset = std::numeric_limits<uint64_t>::max() - 100;
     },
     "buckets[0].devices[0].buffers[1]", "+ bytes 512 overflows 64 bits"},
    // Steps.
    {"StepDeviceOutOfRange", [](fb::PlanT &p) { p.buckets[0]->steps[6]->device = 2; },
     "buckets[0].steps[6].device", "device 2 out of range (topology has 2 devices)"},
    {"StepWithoutOp", [](fb::PlanT &p) { p.buckets[0]->steps[0]->op.Reset(); },
     "buckets[0].steps[0].op", "missing: expected a Launch, Gemm, Copy or AllReduce"},
    {"KernelIndexOutOfRange", [](fb::PlanT &p) { launch(p, 0, 0).kernel = 5; },
     "buckets[0].steps[0].op.kernel", "kernel index 5 out of range (plan has 5 kernels)"},
    {"KernelIndexNegative", [](fb::PlanT &p) { launch(p, 0, 6).kernel = -1; },
     "buckets[0].steps[6].op.kernel", "kernel index -1 out of range"},
    {"GridWithTwoValues", [](fb::PlanT &p) { launch(p, 0, 0).grid = {1, 1}; },
     "buckets[0].steps[0].op.grid", "2 values: expected 3 (x, y, z)"},
    {"GridZero", [](fb::PlanT &p) { launch(p, 0, 0).grid = {0, 1, 1}; },
     "buckets[0].steps[0].op.grid", "[0, 1, 1] has a non-positive size"},
    {"GridYTooLarge", [](fb::PlanT &p) { launch(p, 0, 0).grid = {1, 65536, 1}; },
     "buckets[0].steps[0].op.grid", "expected y and z at most 65535"},
    {"BlockNegative", [](fb::PlanT &p) { launch(p, 0, 2).block = {32, -4, 1}; },
     "buckets[0].steps[2].op.block", "has a non-positive size"},
    {"BlockTooManyThreads", [](fb::PlanT &p) { launch(p, 0, 2).block = {32, 32, 2}; },
     "buckets[0].steps[2].op.block", "[32, 32, 2] has too many threads: expected at most 1024"},
    {"BlockXTooLarge", [](fb::PlanT &p) { launch(p, 0, 2).block = {2048, 1, 1}; },
     "buckets[0].steps[2].op.block", "has too many threads"},
    {"NegativeSharedBytes", [](fb::PlanT &p) { launch(p, 0, 2).shared_bytes = -1; },
     "buckets[0].steps[2].op.shared_bytes", "-1: expected a non-negative byte count"},
    // Launches against the kernel's metadata.
    {"LaunchGridNotTheKernels", [](fb::PlanT &p) { launch(p, 0, 0).grid = {2, 1, 1}; },
     "buckets[0].steps[0].op.grid",
     "[2, 1, 1]: kernel 'weft_rms_norm_linear_0' is written for [1, 1, 1]"},
    {"LaunchBlockNotTheKernels", [](fb::PlanT &p) { launch(p, 0, 2).block = {32, 8, 1}; },
     "buckets[0].steps[2].op.block", "[32, 8, 1]: kernel 'weft_attention_0' is written for "
                                     "[32, 4, 1]"},
    {"LaunchSharedBytesNotTheKernels",
     [](fb::PlanT &p) { launch(p, 0, 2).shared_bytes = 1024; },
     "buckets[0].steps[2].op.shared_bytes", "1024: kernel 'weft_attention_0' is written for 0"},
    {"LaunchArgumentMissing", [](fb::PlanT &p) { launch(p, 0, 0).args.pop_back(); },
     "buckets[0].steps[0].op.args", "2 arguments: kernel 'weft_rms_norm_linear_0' takes 3 "
                                    "parameters"},
    {"LaunchBufferForWeight", [](fb::PlanT &p) { launch(p, 0, 0).args[1] = bufferArg(0); },
     "buckets[0].steps[0].op.args[1]", "kind Buffer: the kernel's parameter is a Weight"},
    {"LaunchWeightForActivation", [](fb::PlanT &p) { launch(p, 0, 2).args[0] = weightArg(1); },
     "buckets[0].steps[2].op.args[0]",
     "kind Weight: the kernel's parameter is a Buffer (an activation: Buffer or Input)"},
    {"LaunchScalarForCache",
     [](fb::PlanT &p) { launch(p, 0, 2).args[1] = planArg(fb::ArgKind::Scalar, 0, 0, 7); },
     "buckets[0].steps[2].op.args[1]", "kind Scalar: the kernel's parameter is a KCache"},
    {"LaunchBufferSmallerThanTheKernelTouches",
     [](fb::PlanT &p) { p.kernels[0]->params[2]->bytes = 4096; },
     "buckets[0].steps[0].op.args[2]",
     "buffer 0 on device 0 holds 256 bytes from offset 0: expected at least 4096"},
    {"LaunchViewPastTheBuffer", [](fb::PlanT &p) { launch(p, 0, 2).args[5]->offset = 960; },
     "buckets[0].steps[2].op.args[5]",
     "buffer 2 on device 0 holds 64 bytes from offset 960: expected at least 128"},
    {"LaunchWeightOfAnotherDType",
     [](fb::PlanT &p) { p.kernels[0]->params[1]->dtype = fb::DType::F16; },
     "buckets[0].steps[0].op.args[1]", "Weight 0 holds BF16: the kernel's parameter is F16"},
    {"LaunchInputOfAnotherDType", [](fb::PlanT &p) { launch(p, 1, 0).args[1] = inputArg(fb::InputKind::TopP); },
     "buckets[1].steps[0].op.args[1]", "Input TopP holds F32: the kernel's parameter is I32"},
    {"LaunchInputSmallerThanTheKernelTouches",
     [](fb::PlanT &p) { p.kernels[2]->params[0]->bytes = 16 * 256 * 4 + 4; },
     "buckets[0].steps[6].op.args[0]", "input Logits holds 16384 bytes: the kernel touches 16388"},
    {"KernelBlockTooLarge", [](fb::PlanT &p) { p.kernels[1]->block = {2048, 1, 1}; },
     "kernels[1].block", "has too many threads"},
    {"KernelWithoutGrid", [](fb::PlanT &p) { p.kernels[2]->grid.clear(); },
     "kernels[2].grid", "0 values: expected 3 (x, y, z)"},
    {"KernelSharedBytesTooLarge", [](fb::PlanT &p) { p.kernels[0]->shared_bytes = 300000; },
     "kernels[0].shared_bytes", "300000: expected 0 to 232448 bytes of dynamic shared memory"},
    {"KernelParamUnknownKind",
     [](fb::PlanT &p) { p.kernels[1]->params[4]->kind = fb::ArgKind(9); },
     "kernels[1].params[4].kind", "unknown arg kind 9"},
    {"AccumulateKernelOfAnotherDType",
     [](fb::PlanT &p) { p.kernels[4]->params[1]->dtype = fb::DType::F32; },
     "buckets[1].steps[2].op.accumulate_kernel",
     "kernel 'weft_accumulate_bf16_n1024' takes a Buffer of 2048 F32 bytes: expected Buffers "
     "of 2048 BF16 bytes"},
    {"AccumulateKernelWithOneParam",
     [](fb::PlanT &p) { p.kernels[4]->params.pop_back(); },
     "buckets[1].steps[2].op.accumulate_kernel",
     "takes 1 parameter: expected 2 (dst, src)"},
    // Args.
    {"BufferIndexOutOfRange", [](fb::PlanT &p) { launch(p, 0, 0).args[2]->index = 40; },
     "buckets[0].steps[0].op.args[2]", "buffer index 40 out of range (device 0 has 3 buffers)"},
    {"BufferOnDeviceWithoutBuffers", [](fb::PlanT &p) { p.buckets[0]->devices.pop_back(); },
     "buckets[0].steps[3].op.target", "buffer index 0 out of range (device 1 has 0 buffers)"},
    {"BufferOffsetPastEnd", [](fb::PlanT &p) { launch(p, 0, 2).args[5]->offset = 1025; },
     "buckets[0].steps[2].op.args[5]",
     "offset 1025 is past the end of buffer 2 on device 0 (1024 bytes)"},
    {"WeightIndexOutOfRange", [](fb::PlanT &p) { launch(p, 0, 0).args[1]->index = 4; },
     "buckets[0].steps[0].op.args[1]", "weight index 4 out of range (manifest has 4 weights)"},
    {"WeightOnOtherDevice", [](fb::PlanT &p) { launch(p, 0, 0).args[1]->index = 2; },
     "buckets[0].steps[0].op.args[1]",
     "weight 2 'model.layers.1.mlp.down_proj.weight' is not on device 0 (it is on devices [1])"},
    {"KCacheLayerOutOfRange", [](fb::PlanT &p) { launch(p, 0, 2).args[1]->index = 2; },
     "buckets[0].steps[2].op.args[1]", "KCache layer 2 out of range (model has 2 layers)"},
    {"VCacheLayerNegative", [](fb::PlanT &p) { launch(p, 0, 2).args[2]->index = -1; },
     "buckets[0].steps[2].op.args[2]", "VCache layer -1 out of range"},
    {"KCacheOfOtherStage", [](fb::PlanT &p) { launch(p, 0, 2).args[1]->index = 1; },
     "buckets[0].steps[2].op.args[1]",
     "KCache layer 1 is not on device 0 (its stage runs on devices [1])"},
    {"UnknownInputKind", [](fb::PlanT &p) { launch(p, 0, 6).args[0]->index = 10; },
     "buckets[0].steps[6].op.args[0]", "input kind 10 unknown: expected 0 (TokenIds) to 9 (Uniform)"},
    {"UnknownArgKind", [](fb::PlanT &p) { launch(p, 0, 6).args[3]->kind = fb::ArgKind(9); },
     "buckets[0].steps[6].op.args[3].kind",
     "unknown arg kind 9: expected Buffer, Weight, KCache, VCache, Input or Scalar"},
    // Gemm.
    {"GemmWithoutA", [](fb::PlanT &p) { gemm(p, 0, 1).a.reset(); }, "buckets[0].steps[1].op.a",
     "missing: expected an Arg"},
    {"GemmZeroK", [](fb::PlanT &p) { gemm(p, 0, 1).k = 0; }, "buckets[0].steps[1].op.k",
     "0 is not positive"},
    {"GemmOutputTooSmall", [](fb::PlanT &p) { gemm(p, 0, 1).n = 1024; },
     "buckets[0].steps[1].op.c",
     "buffer 1 on device 0 holds 512 bytes from offset 0: expected at least 2048"},
    {"GemmInputTooSmall", [](fb::PlanT &p) { gemm(p, 1, 1).m = 64; }, "buckets[1].steps[1].op.a",
     "buffer 0 on device 0 holds 4096 bytes from offset 0: expected at least 8192"},
    {"GemmResidualOutOfRange", [](fb::PlanT &p) { gemm(p, 0, 4).residual->index = 2; },
     "buckets[0].steps[4].op.residual", "buffer index 2 out of range (device 1 has 2 buffers)"},
    {"GemmBiasWeightOnOtherDevice", [](fb::PlanT &p) { gemm(p, 0, 4).bias = weightArg(0); },
     "buckets[0].steps[4].op.bias", "weight 0 'model.embed_tokens.weight' is not on device 1"},
    {"GemmUnknownDType", [](fb::PlanT &p) { gemm(p, 0, 4).dtype = fb::DType(8); },
     "buckets[0].steps[4].op.dtype", "unknown dtype 8"},
    // Copy.
    {"CopyFromOtherDevice", [](fb::PlanT &p) { copy(p, 0, 3).source_device = 1; },
     "buckets[0].steps[3].op.source_device",
     "device 1 differs from the step's device 0: expected the sender to run the copy"},
    {"CopyTargetOutOfRange", [](fb::PlanT &p) { copy(p, 0, 3).target_device = 7; },
     "buckets[0].steps[3].op.target_device", "device 7 out of range"},
    {"CopyTooLarge", [](fb::PlanT &p) { copy(p, 0, 3).bytes = 300; },
     "buckets[0].steps[3].op.source",
     "buffer 0 on device 0 holds 256 bytes from offset 0: expected at least 300"},
    {"CopyTargetOffset", [](fb::PlanT &p) { copy(p, 0, 3).target->offset = 200; },
     "buckets[0].steps[3].op.target",
     "buffer 0 on device 1 holds 56 bytes from offset 200: expected at least 128"},
    {"CopyNothing", [](fb::PlanT &p) { copy(p, 0, 3).bytes = 0; }, "buckets[0].steps[3].op.bytes",
     "0: expected a positive byte count"},
    {"CopyWithoutTarget", [](fb::PlanT &p) { copy(p, 0, 3).target.reset(); },
     "buckets[0].steps[3].op.target", "missing"},
    // AllReduce.
    {"AllReduceWithoutStepDevice", [](fb::PlanT &p) { allReduce(p).devices = {1, 0}; },
     "buckets[1].steps[2].op.devices", "[1, 0] does not start with the step's device 0"},
    {"AllReduceOneDevice", [](fb::PlanT &p) { allReduce(p).devices = {0}; },
     "buckets[1].steps[2].op.devices", "[0]: expected a group of at least 2 devices"},
    {"AllReduceDeviceTwice", [](fb::PlanT &p) { allReduce(p).devices = {0, 0}; },
     "buckets[1].steps[2].op.devices[1]", "device 0 appears twice"},
    {"AllReduceDeviceOutOfRange", [](fb::PlanT &p) { allReduce(p).devices = {0, 2}; },
     "buckets[1].steps[2].op.devices[1]", "device 2 out of range"},
    {"AllReduceTooLarge", [](fb::PlanT &p) { allReduce(p).count = 4096; },
     "buckets[1].steps[2].op.buffers[0]",
     "buffer 1 on device 0 holds 4096 bytes from offset 0: expected at least 8192"},
    {"AllReduceBufferOutOfRange",
     [](fb::PlanT &p) { allReduce(p).buffers[1]->index = 2; },
     "buckets[1].steps[2].op.buffers[1]", "buffer index 2 out of range (device 1 has 2 buffers)"},
    {"AllReduceBufferOffset", [](fb::PlanT &p) { allReduce(p).buffers[0]->offset = 3000; },
     "buckets[1].steps[2].op.buffers[0]",
     "buffer 1 on device 0 holds 1096 bytes from offset 3000: expected at least 2048"},
    {"AllReduceBufferMissing", [](fb::PlanT &p) { allReduce(p).buffers.pop_back(); },
     "buckets[1].steps[2].op.buffers",
     "1 buffers: expected one per device of the group (2)"},
    {"AllReduceWithoutScratch", [](fb::PlanT &p) { allReduce(p).scratch.reset(); },
     "buckets[1].steps[2].op.scratch", "missing"},
    {"AllReduceKernelOutOfRange", [](fb::PlanT &p) { allReduce(p).accumulate_kernel = 5; },
     "buckets[1].steps[2].op.accumulate_kernel",
     "5 out of range: expected a kernel index below 5"},
    {"AllReduceZeroCount", [](fb::PlanT &p) { allReduce(p).count = 0; },
     "buckets[1].steps[2].op.count", "0: expected a positive element count"},
};

INSTANTIATE_TEST_SUITE_P(Rules, PlanRejects, ::testing::ValuesIn(kRejections),
                         [](const ::testing::TestParamInfo<Rejection> &info) {
                           return std::string(info.param.name);
                         });

} // namespace

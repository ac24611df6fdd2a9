// The engine's per-step index checks (serve::BlockTables), on the CPU:
// every kind of bad index is refused with a line naming the token and the
// value, before any kernel could follow it.
#include "runtime/serve/BlockTables.h"

#include <gtest/gtest.h>

namespace weft::serve {
namespace {

KvLayout layout() {
  KvLayout kv;
  kv.blockTokens = 16;
  kv.maxSequences = 4;
  kv.maxBlocksPerSequence = 8; // context 128
  kv.pages = 20;
  return kv;
}

StepInputs step(std::vector<int32_t> ids, std::vector<int32_t> positions,
                std::vector<int32_t> slots) {
  StepInputs in;
  in.ids = std::move(ids);
  in.positions = std::move(positions);
  in.slots = std::move(slots);
  return in;
}

void expectRefused(const Status &s, const std::string &what) {
  ASSERT_FALSE(s.isOk()) << what;
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.message();
}

TEST(BlockTablesTest, ValidStepsPass) {
  StatusOr<BlockTables> t = BlockTables::create(layout());
  ASSERT_TRUE(t.isOk());
  ASSERT_TRUE(t->set(0, {3, 4}).isOk()); // positions 0..31
  ASSERT_TRUE(t->set(2, {0}).isOk());    // positions 0..15
  // Decode tokens of two sequences, a pad (any position), a chunk.
  EXPECT_TRUE(t->check("bucket b", step({1, 2, 0, 7}, {31, 15, 999, 30}, {0, 2, -1, 0}), 100)
                  .isOk());
  EXPECT_EQ(t->pagesOf(0), 2);
  EXPECT_EQ(t->data()[0 * 8 + 1], 4);
  EXPECT_EQ(t->data()[0 * 8 + 2], -1);
}

TEST(BlockTablesTest, EveryKindOfBadIndexIsRefused) {
  StatusOr<BlockTables> t = BlockTables::create(layout());
  ASSERT_TRUE(t.isOk());
  ASSERT_TRUE(t->set(1, {5, 6}).isOk());
  const std::string b = "bucket decode_b2";
  expectRefused(t->check(b, step({100, 1}, {0, 0}, {1, 1}), 100),
                "bucket decode_b2: token 0: id 100 is outside the vocabulary of 100");
  expectRefused(t->check(b, step({1, -5}, {0, 0}, {1, -1}), 100), "token 1: id -5");
  expectRefused(t->check(b, step({1, 1}, {0, 1}, {1, 4}), 100),
                "token 1: slot 4 is outside the plan's 4 sequences (padding is -1)");
  expectRefused(t->check(b, step({1}, {0}, {-2}), 100), "slot -2");
  expectRefused(t->check(b, step({1}, {-1}, {1}), 100),
                "token 0: position -1 is outside the context of 128");
  expectRefused(t->check(b, step({1}, {128}, {1}), 100), "position 128 is outside the context");
  expectRefused(t->check(b, step({1}, {32}, {1}), 100),
                "token 0: position 32 of slot 1 needs 3 KV pages but the slot has 2");
  expectRefused(t->check(b, step({1}, {0}, {0}), 100), "position 0 of slot 0 needs 1 KV pages but the slot has 0");
  expectRefused(t->check(b, step({1, 2}, {5, 5}, {1, 1}), 100),
                "token 1: slot 1 position 5 appears twice in the step");
  expectRefused(t->check(b, step({1, 2}, {5}, {1, 1}), 100), "expected one of each per token");
}

TEST(BlockTablesTest, BadTablesAreRefusedAndFreeingWorks) {
  StatusOr<BlockTables> t = BlockTables::create(layout());
  ASSERT_TRUE(t.isOk());
  uint64_t v = t->version();
  expectRefused(t->set(4, {0}), "block table: slot 4 is outside the plan's 4 sequences");
  expectRefused(t->set(-1, {0}), "slot -1");
  expectRefused(t->set(0, {0, 1, 2, 3, 4, 5, 6, 7, 8}),
                "9 pages, more than the 8 a sequence may have (context 128)");
  expectRefused(t->set(0, {1, 20}), "page 20 (entry 1) is outside the pool of 20");
  expectRefused(t->set(0, {-3}), "page -3");
  EXPECT_EQ(t->version(), v) << "a refused table changes nothing";
  ASSERT_TRUE(t->set(3, {19, 0}).isOk());
  EXPECT_GT(t->version(), v);
  EXPECT_TRUE(t->check("b", step({1}, {31}, {3}), 10).isOk());
  ASSERT_TRUE(t->set(3, {}).isOk()); // freed: later tokens of slot 3 are refused
  expectRefused(t->check("b", step({1}, {0}, {3}), 10), "the slot has 0");
}

TEST(BlockTablesTest, ImpossibleLayoutsAreRefused) {
  KvLayout kv = layout();
  kv.maxSequences = 0;
  EXPECT_FALSE(BlockTables::create(kv).isOk());
  kv = layout();
  kv.maxSequences = 1 << 20;
  kv.maxBlocksPerSequence = 1 << 20;
  expectRefused(BlockTables::create(kv).status(), "too large a block table");
  kv = layout();
  kv.blockTokens = 1 << 16;
  kv.maxBlocksPerSequence = 1 << 16;
  expectRefused(BlockTables::create(kv).status(), "does not fit 32-bit positions");
}

} // namespace
} // namespace weft::serve

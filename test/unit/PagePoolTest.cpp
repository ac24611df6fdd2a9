// The page pool with prefix caching under random interleavings of admit
// (sharing the longest cached prefix), grow, publish, finish, cancel,
// preempt and eviction pressure, against a model of what every page holds:
// no page leaks, none is freed or reused while referenced, the chains stay
// consistent, and a shared page always holds the tokens of the sequence
// that shares it (never a block past a point where the tokens differ).
#include "runtime/serve/PagePool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace weft::serve {
namespace {

constexpr int kBlock = 4;

struct Seq {
  std::vector<int32_t> tokens; // what its positions hold
  std::vector<int32_t> pages;
  size_t published = 0;
};

TEST(PagePoolTest, RandomEventsKeepCountsChainsAndContents) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    const int pages = 40;
    PagePool pool(pages, kBlock, /*prefixCaching=*/true);
    // What each page holds: the tokens written into it (the writer's).
    std::vector<std::vector<int32_t>> content(pages);
    std::vector<Seq> live;
    // A few stems so that prompts share prefixes of every length.
    std::vector<std::vector<int32_t>> stems;
    for (int i = 0; i < 4; ++i) {
      std::vector<int32_t> stem;
      for (int j = 0; j < 24; ++j)
        stem.push_back(int32_t(rng() % 5)); // a small alphabet: near misses
      stems.push_back(stem);
    }
    uint64_t hits = 0;
    auto writeBlocks = [&](Seq &s, size_t fromBlock) {
      for (size_t b = fromBlock; b < s.pages.size(); ++b) {
        std::vector<int32_t> &c = content[size_t(s.pages[b])];
        c.assign(s.tokens.begin() + long(b * kBlock),
                 s.tokens.begin() + long(std::min(s.tokens.size(), (b + 1) * kBlock)));
      }
    };
    for (int event = 0; event < 10000; ++event) {
      int what = int(rng() % 10);
      if (what < 4) { // admit a prompt: a stem's prefix and a random tail
        Seq s;
        const auto &stem = stems[rng() % stems.size()];
        size_t keep = rng() % (stem.size() + 1);
        s.tokens.assign(stem.begin(), stem.begin() + long(keep));
        for (size_t n = 1 + rng() % 9; n > 0; --n)
          s.tokens.push_back(int32_t(rng() % 5));
        int blocks = int((s.tokens.size() + kBlock - 1) / kBlock);
        int shareable = int((s.tokens.size() - 1) / kBlock), idle = 0;
        int hit = pool.lookup(s.tokens.data(), s.tokens.size(), shareable, &idle);
        ASSERT_LE(hit, shareable);
        if (pool.available() - idle < blocks - hit)
          continue; // does not fit now
        ASSERT_EQ(pool.takeCached(s.tokens.data(), s.tokens.size(), hit, s.pages), hit);
        ASSERT_TRUE(pool.take(blocks - hit, s.pages));
        hits += uint64_t(hit);
        // A shared block holds exactly this sequence's tokens.
        for (int b = 0; b < hit; ++b) {
          const std::vector<int32_t> &c = content[size_t(s.pages[size_t(b)])];
          ASSERT_EQ(c, std::vector<int32_t>(s.tokens.begin() + b * kBlock,
                                            s.tokens.begin() + (b + 1) * kBlock))
              << "seed " << seed << " event " << event;
        }
        s.published = size_t(hit);
        writeBlocks(s, size_t(hit)); // the prefill computes the rest
        live.push_back(std::move(s));
      } else if (what < 6 && !live.empty()) { // one more token
        Seq &s = live[rng() % live.size()];
        s.tokens.push_back(int32_t(rng() % 5));
        if (s.tokens.size() > s.pages.size() * kBlock) {
          if (!pool.take(1, s.pages)) {
            s.tokens.pop_back();
            continue;
          }
        }
        // Only its last block changes (never a published one).
        size_t last = (s.tokens.size() - 1) / kBlock;
        ASSERT_GE(last, s.published);
        ASSERT_EQ(pool.references(s.pages[last]), 1) << "writing a shared page";
        writeBlocks(s, last);
      } else if (what < 8 && !live.empty()) { // publish its whole blocks
        Seq &s = live[rng() % live.size()];
        for (; s.published < s.tokens.size() / kBlock; ++s.published)
          pool.publish(s.pages, s.published, s.tokens.data());
      } else if (!live.empty()) { // finish, cancel or preempt: all give back
        size_t i = rng() % live.size();
        pool.give(live[i].pages);
        live.erase(live.begin() + long(i));
      }
      std::string why = pool.verify();
      ASSERT_EQ(why, "") << "seed " << seed << " event " << event;
      // References are exactly the live sequences' holdings.
      std::vector<int> held(pages, 0);
      for (const Seq &s : live)
        for (int32_t p : s.pages)
          ++held[size_t(p)];
      for (int p = 0; p < pages; ++p)
        ASSERT_EQ(pool.references(p), held[size_t(p)]) << "page " << p;
    }
    for (Seq &s : live)
      pool.give(s.pages);
    EXPECT_EQ(pool.verify(), "");
    EXPECT_EQ(pool.available(), pages) << "no leak";
    EXPECT_GT(hits, 100u) << "the events must exercise sharing";
    EXPECT_GT(pool.cachedPages(), 0);
  }
}

TEST(PagePoolTest, WithoutCachingPagesReturnToTheFreeList) {
  PagePool pool(4, 2, /*prefixCaching=*/false);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.take(2, a));
  EXPECT_EQ(a, (std::vector<int32_t>{0, 1}));
  std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_FALSE(pool.publish(a, 0, tokens.data()));
  pool.give(a);
  EXPECT_EQ(pool.cachedPages(), 0);
  EXPECT_EQ(pool.lookup(tokens.data(), tokens.size(), 2), 0);
  EXPECT_EQ(pool.available(), 4);
  EXPECT_FALSE(pool.take(5, a));
  EXPECT_TRUE(a.empty());
}

TEST(PagePoolTest, IdleBlocksAreEvictedOldestFirstAndTheirChainsStop) {
  PagePool pool(3, 2, /*prefixCaching=*/true);
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.take(3, a));
  for (size_t b = 0; b < 3; ++b)
    EXPECT_TRUE(pool.publish(a, b, tokens.data()));
  pool.give(a); // block 2 idles first, then 1, then 0
  EXPECT_EQ(pool.available(), 3);
  EXPECT_EQ(pool.lookup(tokens.data(), tokens.size(), 3), 3);
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.take(1, b)); // evicts the last block
  EXPECT_EQ(pool.lookup(tokens.data(), tokens.size(), 3), 2);
  ASSERT_TRUE(pool.take(1, b)); // then the middle one: block 0 alone
  EXPECT_EQ(pool.lookup(tokens.data(), tokens.size(), 3), 1);
  // The same content published again from another page is not cached twice.
  std::vector<int32_t> c;
  int hit = pool.takeCached(tokens.data(), tokens.size(), 3, c);
  EXPECT_EQ(hit, 1);
  EXPECT_TRUE(pool.publish(c, 0, tokens.data())) << "already published: true";
  EXPECT_EQ(pool.verify(), "");
  pool.give(b);
  pool.give(c);
  EXPECT_EQ(pool.available(), 3);
  EXPECT_EQ(pool.verify(), "");
}

TEST(PagePoolTest, TheSameBlockComputedTwiceStaysPrivate) {
  PagePool pool(4, 2, /*prefixCaching=*/true);
  std::vector<int32_t> tokens = {7, 8, 9, 10};
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.take(2, a));
  ASSERT_TRUE(pool.take(2, b));
  EXPECT_TRUE(pool.publish(a, 0, tokens.data()));
  EXPECT_FALSE(pool.publish(b, 0, tokens.data())) << "cached already, in another page";
  // b's second block still chains to the cached first block (a's).
  EXPECT_TRUE(pool.publish(b, 1, tokens.data()));
  std::vector<int32_t> c;
  EXPECT_EQ(pool.takeCached(tokens.data(), tokens.size(), 2, c), 2);
  EXPECT_EQ(c, (std::vector<int32_t>{a[0], b[1]}));
  pool.give(a);
  pool.give(b);
  pool.give(c);
  EXPECT_EQ(pool.verify(), "");
  EXPECT_EQ(pool.available(), 4);
}

} // namespace
} // namespace weft::serve

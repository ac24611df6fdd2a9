// The pages of the paged KV cache, shared by content (prefix caching).
//
// A page holds one block: blockTokens consecutive positions of a sequence.
// Once every position of a block is in the cache, the scheduler publishes
// it: the block is then known by its tokens and by the block before it (its
// parent; none for a sequence's first block), so a block stands for its
// whole prefix. A prompt that begins with published blocks takes their
// pages instead of computing them again: takeCached() walks the chain from
// the first block and stops at the first block whose tokens differ.
//
// Pages are reference-counted: every sequence whose block table holds a
// page counts once. A published page whose last reference goes stays
// cached, in least-recently-used order, until take() needs a page and no
// free one is left; then the oldest is evicted (unpublished) and reused. A
// page that was never published goes straight back to the free list.
// available() counts free pages and cached ones nobody references, which
// is what admission may take.
//
// Exact: a block is found by its parent's serial number and a comparison of
// its tokens, never by a hash alone. The cache lives in one process with
// one plan, so the tokens are the whole content (the plan fixes the model,
// the KV dtype and everything else that shapes a block's keys and values).
// Not thread-safe: the scheduler's thread owns it.
#ifndef WEFT_RUNTIME_SERVE_PAGEPOOL_H_
#define WEFT_RUNTIME_SERVE_PAGEPOOL_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace weft::serve {

class PagePool {
public:
  // `prefixCaching` false: publish() keeps nothing and takeCached() finds
  // nothing (every page returns to the free list).
  PagePool(int pages, int blockTokens, bool prefixCaching = false);

  int total() const { return total_; }
  int blockTokens() const { return blockTokens_; }
  bool prefixCaching() const { return caching_; }
  // Free pages plus cached pages no sequence references.
  int available() const { return int(free_.size() + idle_.size()); }
  // Published pages (referenced or not) and those of them nobody references.
  int cachedPages() const { return int(blocks_.size()); }
  int idleCachedPages() const { return int(idle_.size()); }

  // Appends `n` pages to `out`, each referenced once: free pages first, then
  // the least recently used idle cached pages, evicted. false (and nothing
  // taken) if fewer than `n` are available.
  bool take(int n, std::vector<int32_t> &out);

  // The cached blocks a sequence starting with tokens[0..count) may share:
  // the longest chain of published blocks whose tokens equal the
  // sequence's, at most `maxBlocks`. `idle` (if given): how many of them
  // nobody references now (taking them lowers available() by that many).
  int lookup(const int32_t *tokens, size_t count, int maxBlocks, int *idle = nullptr) const;
  // Takes the blocks lookup() finds: appends their pages to `out`, each
  // referenced once more (an idle one leaves the least-recently-used
  // list), and returns how many.
  int takeCached(const int32_t *tokens, size_t count, int maxBlocks, std::vector<int32_t> &out);

  // Block `index` of a sequence is whole: pages[index] holds the keys and
  // values of tokens [index * blockTokens, (index + 1) * blockTokens) of
  // `tokens` (the sequence's, from its first). Makes that page findable,
  // unless its parent chain is not cached or the same block already is, in
  // another page (then the sequence keeps a private copy). Returns whether
  // pages[index] is now published.
  bool publish(const std::vector<int32_t> &pages, size_t index, const int32_t *tokens);
  bool published(int32_t page) const;

  // Drops one reference to each page and clears `pages`: an unreferenced
  // published page joins the least-recently-used list (most recent
  // last), any other goes back to the free list.
  void give(std::vector<int32_t> &pages);

  int references(int32_t page) const { return refs_[size_t(page)]; }
  // Checks the pool's invariants (counts, lists, chains); "" when they
  // hold, else what does not. For tests.
  std::string verify() const;

private:
  struct Block {
    uint64_t serial = 0;       // this block's number (parents name it)
    uint64_t parent = 0;       // the parent's serial; 0: a first block
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator idle; // its place in idle_, when unreferenced
  };
  static uint64_t keyOf(uint64_t parent, const int32_t *tokens, int n);
  // The page holding the block (parent, tokens), or -1.
  int32_t find(uint64_t parent, const int32_t *tokens) const;
  // Calls visit(page) for each block of the longest cached chain that
  // begins tokens[0..count) (at most maxBlocks); returns how many.
  template <class Visit>
  int walk(const int32_t *tokens, size_t count, int maxBlocks, Visit visit) const;
  // The serial of the cached block that ends the chain of the first
  // `blocks` blocks of `tokens` (0 for none), or nothing if one is missing.
  bool chainSerial(const int32_t *tokens, size_t blocks, uint64_t &serial) const;
  void unpublish(int32_t page);

  int total_, blockTokens_;
  bool caching_;
  std::vector<int32_t> free_;  // a stack: low ids first
  std::vector<int> refs_;      // per page
  std::unordered_map<int32_t, Block> blocks_;            // published pages
  std::unordered_multimap<uint64_t, int32_t> byKey_;     // keyOf -> page
  std::list<int32_t> idle_;    // unreferenced published pages, oldest first
  uint64_t nextSerial_ = 1;
};

} // namespace weft::serve

#endif // WEFT_RUNTIME_SERVE_PAGEPOOL_H_

#include "runtime/serve/PagePool.h"

#include <algorithm>

namespace weft::serve {

PagePool::PagePool(int pages, int blockTokens, bool prefixCaching)
    : total_(std::max(pages, 0)), blockTokens_(std::max(blockTokens, 1)),
      caching_(prefixCaching), refs_(size_t(total_), 0) {
  free_.reserve(size_t(total_));
  // Low ids first: a lone sequence gets pages 0, 1, 2, ...
  for (int p = total_ - 1; p >= 0; --p)
    free_.push_back(p);
}

uint64_t PagePool::keyOf(uint64_t parent, const int32_t *tokens, int n) {
  // splitmix64 steps over the parent and the tokens: only a bucket key,
  // every match is checked token by token.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent);
  for (int i = 0; i < n; ++i)
    h = mix(h ^ uint64_t(uint32_t(tokens[i])));
  return h;
}

int32_t PagePool::find(uint64_t parent, const int32_t *tokens) const {
  auto [first, last] = byKey_.equal_range(keyOf(parent, tokens, blockTokens_));
  for (auto it = first; it != last; ++it) {
    const Block &b = blocks_.at(it->second);
    if (b.parent == parent && std::equal(b.tokens.begin(), b.tokens.end(), tokens))
      return it->second;
  }
  return -1;
}

bool PagePool::chainSerial(const int32_t *tokens, size_t blocks, uint64_t &serial) const {
  serial = 0;
  for (size_t b = 0; b < blocks; ++b) {
    int32_t page = find(serial, tokens + b * size_t(blockTokens_));
    if (page < 0)
      return false;
    serial = blocks_.at(page).serial;
  }
  return true;
}

bool PagePool::take(int n, std::vector<int32_t> &out) {
  if (n < 0 || n > available())
    return false;
  for (int i = 0; i < n; ++i) {
    int32_t page;
    if (!free_.empty()) {
      page = free_.back();
      free_.pop_back();
    } else {
      page = idle_.front(); // the least recently used cached block
      unpublish(page);
    }
    refs_[size_t(page)] = 1;
    out.push_back(page);
  }
  return true;
}

template <class Visit>
int PagePool::walk(const int32_t *tokens, size_t count, int maxBlocks, Visit visit) const {
  int found = 0;
  uint64_t parent = 0;
  if (caching_)
    for (size_t at = 0; found < maxBlocks && at + size_t(blockTokens_) <= count;
         at += size_t(blockTokens_)) {
      int32_t page = find(parent, tokens + at);
      if (page < 0)
        break;
      parent = blocks_.at(page).serial;
      visit(page);
      ++found;
    }
  return found;
}

int PagePool::lookup(const int32_t *tokens, size_t count, int maxBlocks, int *idle) const {
  int unreferenced = 0;
  int found = walk(tokens, count, maxBlocks,
                   [&](int32_t page) { unreferenced += refs_[size_t(page)] == 0; });
  if (idle)
    *idle = unreferenced;
  return found;
}

int PagePool::takeCached(const int32_t *tokens, size_t count, int maxBlocks,
                         std::vector<int32_t> &out) {
  return walk(tokens, count, maxBlocks, [&](int32_t page) {
    if (refs_[size_t(page)]++ == 0)
      idle_.erase(blocks_.at(page).idle);
    out.push_back(page);
  });
}

bool PagePool::publish(const std::vector<int32_t> &pages, size_t index, const int32_t *tokens) {
  if (!caching_ || index >= pages.size())
    return false;
  int32_t page = pages[index];
  if (page < 0 || page >= total_ || refs_[size_t(page)] == 0 || blocks_.count(page))
    return blocks_.count(page) > 0;
  uint64_t parent = 0;
  if (index > 0) {
    auto p = blocks_.find(pages[index - 1]);
    if (p != blocks_.end())
      parent = p->second.serial;
    else if (!chainSerial(tokens, index, parent))
      return false; // a parent block is not cached: nothing can find this one
  }
  const int32_t *own = tokens + index * size_t(blockTokens_);
  if (find(parent, own) >= 0)
    return false; // cached already, in another page
  Block b;
  b.serial = nextSerial_++;
  b.parent = parent;
  b.tokens.assign(own, own + blockTokens_);
  byKey_.emplace(keyOf(parent, own, blockTokens_), page);
  blocks_.emplace(page, std::move(b));
  return true;
}

bool PagePool::published(int32_t page) const { return blocks_.count(page) > 0; }

void PagePool::unpublish(int32_t page) {
  auto it = blocks_.find(page);
  if (it == blocks_.end())
    return;
  Block &b = it->second;
  if (refs_[size_t(page)] == 0)
    idle_.erase(b.idle);
  auto [first, last] = byKey_.equal_range(keyOf(b.parent, b.tokens.data(), blockTokens_));
  for (auto k = first; k != last; ++k)
    if (k->second == page) {
      byKey_.erase(k);
      break;
    }
  // Its children stay cached but can no longer be reached through it: a
  // lookup stops at the missing parent, and they age out of the list.
  blocks_.erase(it);
}

void PagePool::give(std::vector<int32_t> &pages) {
  // In reverse, so that a sequence's last blocks are the first evicted
  // among its own (its first blocks are the likeliest to be shared).
  for (auto it = pages.rbegin(); it != pages.rend(); ++it) {
    int32_t page = *it;
    if (page < 0 || page >= total_ || refs_[size_t(page)] == 0)
      continue; // not handed out: nothing to give back
    if (--refs_[size_t(page)] > 0)
      continue;
    auto b = blocks_.find(page);
    if (b != blocks_.end())
      b->second.idle = idle_.insert(idle_.end(), page);
    else
      free_.push_back(page);
  }
  pages.clear();
}

std::string PagePool::verify() const {
  size_t referenced = 0;
  for (int32_t p = 0; p < total_; ++p) {
    if (refs_[size_t(p)] < 0)
      return "page " + std::to_string(p) + " has a negative count";
    referenced += refs_[size_t(p)] > 0;
  }
  if (referenced + free_.size() + idle_.size() != size_t(total_))
    return std::to_string(referenced) + " referenced, " + std::to_string(free_.size()) +
           " free and " + std::to_string(idle_.size()) + " idle cached pages of " +
           std::to_string(total_);
  for (int32_t p : free_)
    if (refs_[size_t(p)] != 0 || blocks_.count(p))
      return "free page " + std::to_string(p) + " is referenced or cached";
  for (int32_t p : idle_)
    if (refs_[size_t(p)] != 0 || !blocks_.count(p))
      return "idle page " + std::to_string(p) + " is referenced or not cached";
  if (byKey_.size() != blocks_.size())
    return "the key index and the cached blocks disagree";
  for (const auto &[page, b] : blocks_) {
    if (find(b.parent, b.tokens.data()) != page)
      return "cached page " + std::to_string(page) + " is not found by its content";
    if (b.serial == 0 || b.serial >= nextSerial_ || b.parent >= b.serial)
      return "cached page " + std::to_string(page) + " has a bad chain";
  }
  return "";
}

} // namespace weft::serve

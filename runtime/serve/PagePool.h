// The free pages of the paged KV cache: a stack of page ids, handed out one
// at a time and returned in any order.
#ifndef WEFT_RUNTIME_SERVE_PAGEPOOL_H_
#define WEFT_RUNTIME_SERVE_PAGEPOOL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::serve {

class PagePool {
public:
  explicit PagePool(int pages) : total_(pages) {
    free_.reserve(size_t(pages));
    // Low ids first: a lone sequence gets pages 0, 1, 2, ...
    for (int p = pages - 1; p >= 0; --p)
      free_.push_back(p);
  }
  int total() const { return total_; }
  int available() const { return int(free_.size()); }
  // Appends `n` pages to `out`; false (and nothing taken) if fewer are free.
  bool take(int n, std::vector<int32_t> &out) {
    if (n < 0 || n > available())
      return false;
    for (int i = 0; i < n; ++i) {
      out.push_back(free_.back());
      free_.pop_back();
    }
    return true;
  }
  void give(std::vector<int32_t> &pages) {
    free_.insert(free_.end(), pages.rbegin(), pages.rend());
    pages.clear();
  }

private:
  int total_;
  std::vector<int32_t> free_;
};

} // namespace weft::serve

#endif // WEFT_RUNTIME_SERVE_PAGEPOOL_H_

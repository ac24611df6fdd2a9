// The host's copy of the block tables (which KV page holds each position of
// each sequence) and the checks every step passes before a kernel follows
// any of its indices. No CUDA: the engine uploads data() when stale.
#ifndef WEFT_RUNTIME_SERVE_BLOCKTABLES_H_
#define WEFT_RUNTIME_SERVE_BLOCKTABLES_H_

#include "runtime/serve/Step.h"

#include <string>
#include <vector>

namespace weft::serve {

class BlockTables {
public:
  // Refuses layouts whose table would not fit memory sensibly.
  static StatusOr<BlockTables> create(const KvLayout &kv);

  // Sets the row of `slot`: position p lives in pages[p / blockTokens].
  // Refused: a slot outside the table, more pages than a row holds, a page
  // outside the pool. An empty list frees the slot.
  Status set(int slot, const std::vector<int32_t> &pages);

  // Checks every token of a step: id in [0, vocab); slot -1 (padding) or a
  // row of the table; position inside the context with a page set for it;
  // no (slot, position) twice. `where` starts every message.
  Status check(const std::string &where, const StepInputs &in, int vocab) const;

  const KvLayout &layout() const { return kv_; }
  int pagesOf(int slot) const { return pagesOf_[size_t(slot)]; }
  // [maxSequences][maxBlocksPerSequence] page ids, -1 where none is set.
  const std::vector<int32_t> &data() const { return table_; }
  // Bumped by every set(): a device holding an older version needs a copy.
  uint64_t version() const { return version_; }

private:
  explicit BlockTables(const KvLayout &kv);
  KvLayout kv_;
  std::vector<int32_t> table_;
  std::vector<int> pagesOf_;
  uint64_t version_ = 1;
};

} // namespace weft::serve

#endif // WEFT_RUNTIME_SERVE_BLOCKTABLES_H_

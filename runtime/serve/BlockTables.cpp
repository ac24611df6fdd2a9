// Block tables on the host and the per-step index checks.
#include "runtime/serve/BlockTables.h"

#include <algorithm>
#include <utility>

namespace weft::serve {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
} // namespace

BlockTables::BlockTables(const KvLayout &kv)
    : kv_(kv), table_(size_t(kv.maxSequences) * size_t(kv.maxBlocksPerSequence), -1),
      pagesOf_(size_t(kv.maxSequences), 0) {}

StatusOr<BlockTables> BlockTables::create(const KvLayout &kv) {
  if (kv.blockTokens < 1 || kv.maxSequences < 1 || kv.maxBlocksPerSequence < 1 || kv.pages < 0)
    return invalidArgument("kv_cache: block_tokens " + str(kv.blockTokens) + ", max_sequences " +
                           str(kv.maxSequences) + ", max_blocks_per_sequence " +
                           str(kv.maxBlocksPerSequence) + ": expected positive values");
  if (uint64_t(kv.maxSequences) * uint64_t(kv.maxBlocksPerSequence) > (uint64_t(1) << 28))
    return invalidArgument("kv_cache: " + str(kv.maxSequences) + " sequences x " +
                           str(kv.maxBlocksPerSequence) + " blocks is too large a block table");
  if (uint64_t(kv.blockTokens) * uint64_t(kv.maxBlocksPerSequence) > (uint64_t(1) << 30))
    return invalidArgument("kv_cache: a context of " +
                           str(int64_t(kv.blockTokens) * kv.maxBlocksPerSequence) +
                           " positions does not fit 32-bit positions");
  return BlockTables(kv);
}

Status BlockTables::set(int slot, const std::vector<int32_t> &pages) {
  if (slot < 0 || slot >= kv_.maxSequences)
    return outOfRange("block table: slot " + str(slot) + " is outside the plan's " +
                      str(kv_.maxSequences) + " sequences");
  if (pages.size() > size_t(kv_.maxBlocksPerSequence))
    return outOfRange("block table of slot " + str(slot) + ": " + str(int64_t(pages.size())) +
                      " pages, more than the " + str(kv_.maxBlocksPerSequence) +
                      " a sequence may have (context " + str(kv_.maxContext()) + ")");
  for (size_t i = 0; i < pages.size(); ++i)
    if (pages[i] < 0 || pages[i] >= kv_.pages)
      return outOfRange("block table of slot " + str(slot) + ": page " + str(pages[i]) +
                        " (entry " + str(int64_t(i)) + ") is outside the pool of " +
                        str(kv_.pages));
  int32_t *row = table_.data() + size_t(slot) * size_t(kv_.maxBlocksPerSequence);
  std::fill(row, row + kv_.maxBlocksPerSequence, -1);
  std::copy(pages.begin(), pages.end(), row);
  pagesOf_[size_t(slot)] = int(pages.size());
  ++version_;
  return Status::ok();
}

Status BlockTables::check(const std::string &where, const StepInputs &in, int vocab) const {
  if (in.positions.size() != in.ids.size() || in.slots.size() != in.ids.size())
    return invalidArgument(where + ": " + str(int64_t(in.ids.size())) + " ids, " +
                           str(int64_t(in.positions.size())) + " positions and " +
                           str(int64_t(in.slots.size())) + " slots: expected one of each per token");
  auto at = [&](size_t t) { return where + ": token " + str(int64_t(t)) + ": "; };
  // (slot, position) of every real token, to find one written twice.
  std::vector<int64_t> keys;
  keys.reserve(in.ids.size());
  for (size_t t = 0; t < in.ids.size(); ++t) {
    int32_t id = in.ids[t], slot = in.slots[t], pos = in.positions[t];
    if (id < 0 || id >= vocab)
      return outOfRange(at(t) + "id " + str(id) + " is outside the vocabulary of " + str(vocab));
    if (slot == kPaddingSlot)
      continue;
    if (slot < 0 || slot >= kv_.maxSequences)
      return outOfRange(at(t) + "slot " + str(slot) + " is outside the plan's " +
                        str(kv_.maxSequences) + " sequences (padding is -1)");
    if (pos < 0 || pos >= kv_.maxContext())
      return outOfRange(at(t) + "position " + str(pos) + " is outside the context of " +
                        str(kv_.maxContext()));
    int need = pos / kv_.blockTokens + 1;
    if (need > pagesOf_[size_t(slot)])
      return outOfRange(at(t) + "position " + str(pos) + " of slot " + str(slot) + " needs " +
                        str(need) + " KV pages but the slot has " + str(pagesOf_[size_t(slot)]));
    keys.push_back(int64_t(slot) << 32 | int64_t(pos));
  }
  std::sort(keys.begin(), keys.end());
  auto twice = std::adjacent_find(keys.begin(), keys.end());
  if (twice != keys.end()) {
    int32_t slot = int32_t(*twice >> 32), pos = int32_t(*twice & 0xffffffff);
    // Name the token that repeats the pair: its second occurrence.
    size_t t = 0;
    for (int found = 0; t < in.ids.size(); ++t)
      if (in.slots[t] == slot && in.positions[t] == pos && ++found == 2)
        break;
    return invalidArgument(at(t) + "slot " + str(slot) + " position " + str(pos) +
                           " appears twice in the step");
  }
  return Status::ok();
}

} // namespace weft::serve

// The KV cache: its layout (pages, block size, sequences) from the plan,
// each device's K and V caches and block table buffer, and the host's
// block tables with the version each device holds.
#ifndef WEFT_RUNTIME_ENGINE_KVCACHE_H_
#define WEFT_RUNTIME_ENGINE_KVCACHE_H_

#include "runtime/base/Status.h"
#include "runtime/engine/Devices.h"
#include "runtime/plan/PlanReader.h"
#include "runtime/serve/BlockTables.h"
#include "runtime/serve/Step.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace weft::engine {

class KvCacheManager {
public:
  // The layout and the host's block tables, from the plan's kv_cache spec
  // and the layers whose caches each of `deviceCount` devices holds.
  Status setUp(const plan::fb::Plan &plan, size_t deviceCount);

  // Device `index`'s block table buffer (holding the tables as they are)
  // and the K and V caches of its layers, each of layout().pages blocks.
  Status allocate(DeviceSet &devices, size_t index);

  const serve::KvLayout &layout() const { return layout_; }
  serve::BlockTables &tables() { return *tables_; }
  const serve::BlockTables &tables() const { return *tables_; }

  // Whether device `index` holds an older version of the tables.
  bool stale(size_t index) const { return tablesVersion_[index] != tables_->version(); }
  // Copies `pinned` (the tables as they are now, in pinned host memory
  // that stays untouched until the copy has run) to device `index`'s
  // buffer on its stream; its GPU must be current.
  Status upload(Device &dev, size_t index, const int32_t *pinned, const std::string &where);

private:
  bool blockBytesOn(size_t device, uint64_t &bytes) const;

  const plan::fb::Plan *plan_ = nullptr;
  std::vector<std::set<int>> layers_; // per device: layers whose caches it holds
  serve::KvLayout layout_;
  // The host's block tables; each device records the version it holds.
  std::optional<serve::BlockTables> tables_;
  std::vector<uint64_t> tablesVersion_;
};

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_KVCACHE_H_

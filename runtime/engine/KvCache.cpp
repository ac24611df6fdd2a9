// Sizing the KV cache from the plan, allocating it on the devices, and
// keeping their block tables in step with the host's.
#include "runtime/engine/KvCache.h"

#include <algorithm>
#include <climits>

namespace weft::engine {

namespace fb = ::weft::plan::fb;

// A tensor-parallel rank holds its share of the KV heads.
bool KvCacheManager::blockBytesOn(size_t device, uint64_t &bytes) const {
  const fb::KvCacheSpec *kv = plan_->kv_cache();
  const auto *heads = kv->kv_heads_per_device();
  uint64_t h = heads && device < heads->size() ? uint64_t(heads->Get(uint32_t(device)))
                                               : uint64_t(kv->num_kv_heads());
  return plan::dtypeBytes(kv->dtype(),
                          uint64_t(layout_.blockTokens) * h * uint64_t(kv->head_dim()), bytes);
}

Status KvCacheManager::setUp(const fb::Plan &plan, size_t deviceCount) {
  plan_ = &plan;
  const fb::KvCacheSpec *kv = plan.kv_cache();
  // Which layers' caches each device holds.
  layers_.assign(deviceCount, {});
  for (const fb::Bucket *b : *plan.buckets())
    for (const fb::Step *s : *b->steps())
      if (const fb::Launch *l = s->op_as_Launch())
        for (const fb::Arg *a : *l->args())
          if (a->kind() == fb::ArgKind::KCache || a->kind() == fb::ArgKind::VCache)
            layers_[size_t(s->device())].insert(a->index());
  // Page ids are shared by every device's cache (one block table), so
  // the pool is the smallest count among the devices that hold layers.
  layout_.pages = -1;
  for (size_t i = 0; i < deviceCount; ++i)
    if (!layers_[i].empty()) {
      int64_t n = kv->blocks_per_device() && i < kv->blocks_per_device()->size()
                      ? kv->blocks_per_device()->Get(uint32_t(i))
                      : 0;
      if (n < 1 || n > INT32_MAX)
        return invalidArgument("kv_cache.blocks_per_device[" + std::to_string(i) + "]: " +
                               std::to_string(n) + " pages for a device with layers");
      layout_.pages = layout_.pages < 0 ? int(n) : std::min(layout_.pages, int(n));
    }
  layout_.pages = std::max(layout_.pages, 0);
  layout_.blockTokens = kv->block_tokens();
  layout_.maxSequences = kv->max_sequences();
  layout_.maxBlocksPerSequence = kv->max_blocks_per_sequence();
  StatusOr<serve::BlockTables> bt = serve::BlockTables::create(layout_);
  if (!bt.isOk())
    return bt.status();
  tables_.emplace(std::move(bt.value()));
  tablesVersion_.assign(deviceCount, tables_->version());
  return Status::ok();
}

Status KvCacheManager::allocate(DeviceSet &devices, size_t i) {
  Device &dev = devices[i];
  int d = int(i);
  int layerCount = plan_->model()->num_layers();
  // Block tables: one row per slot, filled by setBlockTable.
  const std::vector<int32_t> &rows = tables_->data();
  StatusOr<void *> bt = devices.allocate(d, rows.size() * 4, "block tables");
  if (!bt.isOk()) return bt.status();
  dev.blockTables = *bt;
  WEFT_CUDA(cudaMemcpy(dev.blockTables, rows.data(), rows.size() * 4,
                       cudaMemcpyHostToDevice), "block tables");
  dev.inputs[int(fb::InputKind::BlockTables)] = dev.blockTables;
  dev.kCache.assign(size_t(layerCount), nullptr);
  dev.vCache.assign(size_t(layerCount), nullptr);
  uint64_t blockBytes = 0;
  if (!blockBytesOn(i, blockBytes))
    return invalidArgument("kv_cache: unsupported dtype");
  uint64_t cacheBytes = uint64_t(layout_.pages) * blockBytes;
  for (int layer : layers_[i]) {
    StatusOr<void *> k = devices.allocate(d, cacheBytes, "the K cache of layer " + std::to_string(layer));
    if (!k.isOk()) return k.status();
    StatusOr<void *> v = devices.allocate(d, cacheBytes, "the V cache of layer " + std::to_string(layer));
    if (!v.isOk()) return v.status();
    dev.kCache[size_t(layer)] = *k;
    dev.vCache[size_t(layer)] = *v;
  }
  return Status::ok();
}

Status KvCacheManager::upload(Device &dev, size_t index, const int32_t *pinned,
                              const std::string &where) {
  WEFT_CUDA(cudaMemcpyAsync(dev.blockTables, pinned, tables_->data().size() * 4,
                            cudaMemcpyHostToDevice, dev.stream),
            where + ": block tables");
  tablesVersion_[index] = tables_->version();
  return Status::ok();
}

} // namespace weft::engine

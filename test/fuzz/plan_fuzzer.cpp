// libFuzzer target for the plan reader: rejections must be one line naming the
// input, and an accepted plan must be safe to use the way the runtime does,
// following every index without further checks, and to render as JSON/text.
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/PlanReader.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

using namespace weft::plan;

namespace {

constexpr const char *kName = "fuzz/model.weft";

void require(bool ok) {
  if (!ok)
    __builtin_trap();
}

void checkError(const weft::Status &status) {
  const std::string &m = status.message();
  const std::string prefix = std::string(kName) + ": ";
  require(!status.isOk() && m.size() > prefix.size() && m.compare(0, prefix.size(), prefix) == 0 &&
          m.find('\n') == std::string::npos && m.find('\r') == std::string::npos);
}

template <typename T> uint32_t count(const flatbuffers::Vector<T> *v) {
  return v ? v->size() : 0;
}

// Follows an Arg on `device` as the runtime would bind it.
void useArg(const fb::Plan &plan, const fb::Bucket &bucket, const fb::Arg &arg, int32_t device) {
  switch (arg.kind()) {
  case fb::ArgKind::Buffer: {
    const fb::DeviceBuffers *found = nullptr;
    for (uint32_t i = 0; i < count(bucket.devices()); ++i)
      if (bucket.devices()->Get(i)->device() == device)
        found = bucket.devices()->Get(i);
    require(found && uint32_t(arg.index()) < count(found->buffers()));
    const fb::Buffer *b = found->buffers()->Get(arg.index());
    require(b->offset() + b->bytes() >= b->offset() &&
            b->offset() + b->bytes() <= found->arena_bytes() && arg.offset() <= b->bytes());
    break;
  }
  case fb::ArgKind::Weight: {
    require(uint32_t(arg.index()) < count(plan.manifest()->weights()));
    const auto *holders = plan.manifest()->weights()->Get(arg.index())->devices();
    require(std::find(holders->begin(), holders->end(), device) != holders->end());
    break;
  }
  case fb::ArgKind::KCache:
  case fb::ArgKind::VCache:
    require(arg.index() >= 0 && arg.index() < plan.model()->num_layers());
    break;
  case fb::ArgKind::Input:
    require(arg.index() >= 0 && arg.index() <= int32_t(fb::InputKind::MAX));
    break;
  case fb::ArgKind::Scalar:
    break;
  default:
    __builtin_trap();
  }
}

void usePlan(const fb::Plan &plan) {
  require(plan.version() == kPlanFormatVersion && plan.model() && plan.topology() &&
          plan.partition() && plan.manifest() && plan.kv_cache());
  const int32_t devices = int32_t(count(plan.topology()->devices()));
  require(devices > 0 && count(plan.kv_cache()->blocks_per_device()) == uint32_t(devices));
  int32_t next = 0;
  for (uint32_t s = 0; s < count(plan.partition()->stages()); ++s) {
    const fb::Stage *stage = plan.partition()->stages()->Get(s);
    require(stage->first_layer() == next && stage->end_layer() > next);
    next = stage->end_layer();
    for (int32_t d : *stage->devices())
      require(d >= 0 && d < devices);
  }
  require(next == plan.model()->num_layers());
  for (uint32_t w = 0; w < count(plan.manifest()->weights()); ++w) {
    const fb::Weight *weight = plan.manifest()->weights()->Get(w);
    require(count(weight->sources()) > 0 && count(weight->devices()) > 0);
    for (uint32_t i = 0; i < weight->sources()->size(); ++i) {
      int32_t file = weight->sources()->Get(i)->file();
      require(file == -1 || (file >= 0 && uint32_t(file) < count(plan.manifest()->files())));
    }
  }
  for (uint32_t k = 0; k < count(plan.kernels()); ++k)
    require(count(plan.kernels()->Get(k)->binaries()) > 0);
  require(count(plan.buckets()) > 0);
  for (uint32_t b = 0; b < plan.buckets()->size(); ++b) {
    const fb::Bucket &bucket = *plan.buckets()->Get(b);
    require(bucket.tokens() > 0);
    for (uint32_t s = 0; s < count(bucket.steps()); ++s) {
      const fb::Step &step = *bucket.steps()->Get(s);
      require(step.device() >= 0 && step.device() < devices);
      if (const fb::Launch *l = step.op_as_Launch()) {
        require(uint32_t(l->kernel()) < count(plan.kernels()));
        require(count(l->grid()) == 3 && count(l->block()) == 3);
        int64_t threads = int64_t(l->block()->Get(0)) * l->block()->Get(1) * l->block()->Get(2);
        require(threads > 0 && threads <= 1024);
        for (uint32_t a = 0; a < count(l->args()); ++a)
          useArg(plan, bucket, *l->args()->Get(a), step.device());
      } else if (const fb::Gemm *g = step.op_as_Gemm()) {
        require(g->a() && g->b() && g->c());
        for (const fb::Arg *arg : {g->a(), g->b(), g->c(), g->bias(), g->residual()})
          if (arg)
            useArg(plan, bucket, *arg, step.device());
      } else if (const fb::Copy *c = step.op_as_Copy()) {
        require(c->source() && c->target() && c->target_device() >= 0 &&
                c->target_device() < devices);
        useArg(plan, bucket, *c->source(), c->source_device());
        useArg(plan, bucket, *c->target(), c->target_device());
      } else if (const fb::AllReduce *r = step.op_as_AllReduce()) {
        require(r->scratch() && count(r->devices()) >= 2 &&
                count(r->buffers()) == count(r->devices()) &&
                uint32_t(r->accumulate_kernel()) < count(plan.kernels()));
        for (uint32_t i = 0; i < count(r->devices()); ++i) {
          int32_t d = r->devices()->Get(i);
          require(d >= 0 && d < devices);
          useArg(plan, bucket, *r->buffers()->Get(i), d);
        }
        useArg(plan, bucket, *r->scratch(), step.device());
      } else {
        __builtin_trap(); // accepted a step without a known op
      }
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // With the seal checked (what every load does): almost every mutation
  // ends at the checksum, which must itself be a clean error.
  auto sealed = PlanFile::fromBytes(std::vector<uint8_t>(data, data + size), kName);
  if (!sealed.isOk())
    checkError(sealed.status());
  // Without it, so mutations reach the structural and semantic checks.
  SealPolicy unsealed;
  unsealed.requireSeal = false;
  auto file = PlanFile::fromBytes(std::vector<uint8_t>(data, data + size), kName, unsealed);
  if (!file.isOk()) {
    checkError(file.status());
    return 0;
  }
  usePlan(file->plan());
  require(!planToJson(file->plan()).empty());
  require(!planSummary(file->plan()).empty());
  return 0;
}

// libFuzzer target for the plan reader: rejections must be one line naming the
// input, and an accepted plan must be safe to use the way the runtime does,
// following every index without further checks, and to render as JSON/text.
// Built twice: weft-fuzz-plan mutates bytes; weft-fuzz-plan-semantic
// (WEFT_PLAN_SEMANTIC_MUTATOR) mutates one field of a well-formed plan at a
// time (an argument's kind, index or offset, a device, a size, a dtype, a
// shape, launch geometry, the partition) and seals the result, so every
// mutant reaches the semantic checks, as a hand-built hostile plan would.
#include "runtime/plan/PlanJson.h"
#include "runtime/plan/PlanReader.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
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
        // The launch is the kernel's, argument for parameter, and every
        // buffer holds what the kernel touches.
        const fb::Kernel *k = plan.kernels()->Get(uint32_t(l->kernel()));
        require(count(k->params()) == count(l->args()) && l->shared_bytes() == k->shared_bytes());
        for (uint32_t i = 0; i < 3; ++i)
          require(l->grid()->Get(i) == k->grid()->Get(i) &&
                  l->block()->Get(i) == k->block()->Get(i));
        for (uint32_t a = 0; a < count(l->args()); ++a) {
          const fb::Arg &arg = *l->args()->Get(a);
          useArg(plan, bucket, arg, step.device());
          const fb::KernelParam &p = *k->params()->Get(a);
          require((arg.kind() == fb::ArgKind::Scalar) == (p.kind() == fb::ArgKind::Scalar));
          if (arg.kind() == fb::ArgKind::Buffer)
            for (uint32_t i = 0; i < count(bucket.devices()); ++i)
              if (bucket.devices()->Get(i)->device() == step.device()) {
                const fb::Buffer *buf =
                    bucket.devices()->Get(i)->buffers()->Get(uint32_t(arg.index()));
                require(p.bytes() <= buf->bytes() - arg.offset());
              }
        }
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

#ifdef WEFT_PLAN_SEMANTIC_MUTATOR
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

// A value near the interesting edges of `v`.
int64_t edge(int64_t v, std::mt19937 &rng) {
  int64_t up = v, down = v, twice = v; // saturating: the mutator has no UB of its own
  __builtin_add_overflow(v, 1, &up) ? up = v : up;
  __builtin_sub_overflow(v, 1, &down) ? down = v : down;
  __builtin_mul_overflow(v, 2, &twice) ? twice = v : twice;
  const int64_t choices[] = {-1, 0, 1, down, up, twice, v / 2,
                             std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int64_t>::max(), int64_t(rng() % 4096)};
  return choices[rng() % (sizeof choices / sizeof choices[0])];
}

template <typename T> void nudge(T &field, std::mt19937 &rng) {
  field = T(edge(int64_t(field), rng));
}

void mutateArg(fb::ArgT &a, std::mt19937 &rng) {
  switch (rng() % 3) {
  case 0: a.kind = fb::ArgKind(rng() % 7); break;
  case 1: nudge(a.index, rng); break;
  default: nudge(a.offset, rng); break;
  }
}

void mutate(fb::PlanT &plan, std::mt19937 &rng) {
  auto pick = [&](auto &v) -> decltype(&v[0]) { return v.empty() ? nullptr : &v[rng() % v.size()]; };
  auto *bucket = pick(plan.buckets);
  switch (rng() % 9) {
  case 8: // a kernel's declared geometry or parameters
    if (auto *k = pick(plan.kernels)) {
      switch (rng() % 4) {
      case 0:
        if (auto *d = pick(rng() % 2 ? (*k)->grid : (*k)->block))
          nudge(*d, rng);
        break;
      case 1: nudge((*k)->shared_bytes, rng); break;
      default:
        if (auto *p = pick((*k)->params)) {
          switch (rng() % 3) {
          case 0: (*p)->kind = fb::ArgKind(rng() % 7); break;
          case 1: (*p)->dtype = fb::DType(rng() % 9); break;
          default: nudge((*p)->bytes, rng); break;
          }
        } else if (!(*k)->params.empty() && rng() % 2) {
          (*k)->params.pop_back();
        }
      }
    }
    break;
  case 0: // an argument of a step
    if (bucket && *bucket)
      if (auto *step = pick((*bucket)->steps)) {
        if (auto *l = (*step)->op.AsLaunch()) {
          if (auto *a = pick(l->args))
            mutateArg(**a, rng);
        } else if (auto *g = (*step)->op.AsGemm()) {
          std::unique_ptr<fb::ArgT> *ops[] = {&g->a, &g->b, &g->c, &g->bias, &g->residual};
          auto &op = *ops[rng() % 5];
          if (!op)
            op = std::make_unique<fb::ArgT>();
          mutateArg(*op, rng);
        } else if (auto *c = (*step)->op.AsCopy()) {
          mutateArg(rng() % 2 ? *c->source : *c->target, rng);
          if (rng() % 2)
            nudge(c->bytes, rng);
        }
      }
    break;
  case 1: // which device a step runs on
    if (bucket && *bucket)
      if (auto *step = pick((*bucket)->steps))
        nudge((*step)->device, rng);
    break;
  case 2: // a GEMM's shape or dtype
    if (bucket && *bucket)
      if (auto *step = pick((*bucket)->steps))
        if (auto *g = (*step)->op.AsGemm()) {
          switch (rng() % 4) {
          case 0: nudge(g->m, rng); break;
          case 1: nudge(g->n, rng); break;
          case 2: nudge(g->k, rng); break;
          default: g->dtype = fb::DType(rng() % 8); break;
          }
        }
    break;
  case 3: // a weight's dtype, shape or holders
    if (plan.manifest)
      if (auto *w = pick(plan.manifest->weights)) {
        switch (rng() % 3) {
        case 0: (*w)->dtype = fb::DType(rng() % 8); break;
        case 1:
          if (auto *d = pick((*w)->shape))
            nudge(*d, rng);
          break;
        default:
          if (auto *d = pick((*w)->devices))
            nudge(*d, rng);
          break;
        }
      }
    break;
  case 4: // a buffer's place or size
    if (bucket && *bucket)
      if (auto *db = pick((*bucket)->devices))
        if (auto *b = pick((*db)->buffers))
          rng() % 2 ? nudge((*b)->offset, rng) : nudge((*b)->bytes, rng);
    break;
  case 5: // launch geometry
    if (bucket && *bucket)
      if (auto *step = pick((*bucket)->steps))
        if (auto *l = (*step)->op.AsLaunch()) {
          std::vector<int32_t> *dims[] = {&l->grid, &l->block};
          if (auto *d = pick(*dims[rng() % 2]))
            nudge(*d, rng);
          else
            nudge(l->shared_bytes, rng);
        }
    break;
  case 6: // the KV cache
    if (plan.kv_cache)
      switch (rng() % 4) {
      case 0: nudge(plan.kv_cache->block_tokens, rng); break;
      case 1: nudge(plan.kv_cache->max_sequences, rng); break;
      case 2: nudge(plan.kv_cache->max_blocks_per_sequence, rng); break;
      default:
        if (auto *n = pick(plan.kv_cache->blocks_per_device))
          nudge(*n, rng);
      }
    break;
  default: // the partition's layers
    if (plan.partition)
      if (auto *st = pick(plan.partition->stages))
        rng() % 2 ? nudge((*st)->first_layer, rng) : nudge((*st)->end_layer, rng);
    break;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  flatbuffers::Verifier verifier(data, size, 64, 1000000);
  if (size < kMinPlanFileSize || !fb::PlanBufferHasIdentifier(data) ||
      !fb::VerifyPlanBuffer(verifier))
    return LLVMFuzzerMutate(data, size, maxSize);
  std::mt19937 rng(seed);
  std::unique_ptr<fb::PlanT> plan(fb::GetPlan(data)->UnPack());
  for (unsigned n = 1 + rng() % 3; n > 0; --n)
    mutate(*plan, rng);
  if (!plan->seal) {
    plan->seal = std::make_unique<fb::SealT>();
    plan->seal->hash.assign(32, 0);
    plan->seal->signer.assign(32, 0);
    plan->seal->signature.assign(64, 0);
  }
  flatbuffers::FlatBufferBuilder builder;
  fb::FinishPlanBuffer(builder, fb::Plan::Pack(builder, plan.get()));
  std::vector<uint8_t> bytes(builder.GetBufferPointer(),
                             builder.GetBufferPointer() + builder.GetSize());
  if (!sealPlan(bytes, nullptr).isOk() || bytes.size() > maxSize)
    return size;
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
#endif

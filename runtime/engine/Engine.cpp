// The Engine: sets every piece up from a verified plan (devices,
// collectives, kernels, buffers, weights, micro-batches, warm-up) and
// answers the public API; the steps themselves are in StepLaunch.cpp and
// BucketExecution.cpp.
#include "runtime/engine/Engine.h"

#include "runtime/engine/EngineImpl.h"
#include "runtime/engine/WeightLoader.h"

#include <algorithm>
#include <chrono>


namespace weft::engine {

void Engine::Impl::progress(const std::string &phase, uint64_t done, uint64_t total) {
  if (options.progress)
    options.progress(phase, done, total);
}

Status Engine::Impl::setUpCollectives() {
  std::set<std::vector<int>> groups;
  for (const fb::Bucket *b : *p->buckets())
    for (const fb::Step *s : *b->steps())
      if (const fb::AllReduce *r = s->op_as_AllReduce())
        groups.insert(std::vector<int>(r->devices()->begin(), r->devices()->end()));
  if (groups.empty())
    return Status::ok();
  std::string why;
  if (!options.allowNccl) {
    why = "NCCL disabled";
  } else {
    StatusOr<const gpu::Nccl *> loaded = gpu::Nccl::load();
    if (loaded.isOk())
      nccl = *loaded;
    else
      why = loaded.status().message();
  }
  for (const std::vector<int> &group : groups) {
    std::vector<int> gpus;
    for (int d : group)
      gpus.push_back(devices[size_t(d)].gpu);
    if (std::set<int>(gpus.begin(), gpus.end()).size() != gpus.size()) {
      why = "ranks share a GPU";
      continue;
    }
    if (!nccl)
      continue;
    StatusOr<std::vector<gpu::NcclComm>> c = nccl->initAll(gpus);
    if (!c.isOk())
      return c.status();
    comms[group] = std::move(c.value());
  }
  // Buckets with NCCL all-reduces are captured like every other bucket
  // (NCCL records its kernels into the graph), so no step of a bucket is
  // launched from the host; an NCCL build that cannot be captured fails the
  // capture, and that bucket runs step by step from then on
  // (Engine::Impl::enqueueSteps).
  collectives = comms.size() == groups.size()
                    ? "NCCL " + nccl->version()
                    : comms.empty() ? "peer copies (" + why + ")"
                                    : "NCCL " + nccl->version() + " and peer copies (" + why + ")";
  return Status::ok();
}

Status Engine::Impl::allocateBuffers() {
  vocab = p->model()->vocab_size();
  for (const fb::Bucket *b : *p->buckets())
    maxTokens = std::max(maxTokens, b->tokens());
  WEFT_RETURN_IF_ERROR(kv.setUp(*p, devices.size()));
  std::vector<uint64_t> arena(devices.size(), 0);
  for (const fb::Bucket *b : *p->buckets())
    for (const fb::DeviceBuffers *db : *b->devices())
      arena[size_t(db->device())] = std::max(arena[size_t(db->device())], db->arena_bytes());
  for (size_t i = 0; i < devices.size(); ++i) {
    Device &dev = devices[i];
    int d = int(i);
    StatusOr<void *> a = devices.allocate(d, arena[i], "its activation arena");
    if (!a.isOk()) return a.status();
    dev.arena = *a;
    // Inputs: token vectors for the largest bucket, outputs, sampling.
    for (fb::InputKind k : {fb::InputKind::TokenIds, fb::InputKind::Positions,
                            fb::InputKind::Slots, fb::InputKind::NextTokens,
                            fb::InputKind::Temperature, fb::InputKind::TopK,
                            fb::InputKind::TopP, fb::InputKind::Uniform}) {
      StatusOr<void *> in = devices.allocate(d, uint64_t(maxTokens) * 4, "inputs");
      if (!in.isOk()) return in.status();
      WEFT_CUDA(cudaMemset(*in, 0, uint64_t(maxTokens) * 4), "zeroing inputs");
      dev.inputs[int(k)] = *in;
    }
    StatusOr<void *> logits =
        devices.allocate(d, uint64_t(maxTokens) * uint64_t(vocab) * 4, "logits");
    if (!logits.isOk()) return logits.status();
    dev.inputs[int(fb::InputKind::Logits)] = *logits;
    // top_p = 1 means no nucleus cut; temperature 0 means greedy.
    std::vector<float> ones(size_t(maxTokens), 1.0f);
    WEFT_CUDA(cudaMemcpy(dev.inputs[int(fb::InputKind::TopP)], ones.data(),
                         ones.size() * 4, cudaMemcpyHostToDevice), "top_p");
    WEFT_RETURN_IF_ERROR(kv.allocate(devices, i));
  }
  return Status::ok();
}

void Engine::Impl::findBucketDevices() {
  for (const fb::Bucket *b : *p->buckets()) {
    BucketDevices bd;
    for (const fb::Step *s : *b->steps()) {
      bd.used.insert(s->device());
      if (const fb::Copy *c = s->op_as_Copy())
        bd.used.insert(c->target_device());
      if (const fb::AllReduce *r = s->op_as_AllReduce())
        bd.used.insert(r->devices()->begin(), r->devices()->end());
      if (const fb::Launch *l = s->op_as_Launch())
        for (const fb::Arg *a : *l->args())
          if (a->kind() == fb::ArgKind::Input &&
              a->index() == int32_t(fb::InputKind::NextTokens))
            bd.output = s->device();
    }
    bucketDevices.push_back(std::move(bd));
  }
}

Status Engine::Impl::chooseLanes(int requested) {
  int stages = 0;
  if (const fb::Partition *part = p->partition())
    if (part->stages())
      stages = int(part->stages()->size());
  bool allReduce = false;
  for (const fb::Bucket *b : *p->buckets())
    for (const fb::Step *s : *b->steps())
      allReduce |= s->op_as_AllReduce() != nullptr;
  int planned = 1;
  if (const fb::Partition *part = p->partition())
    if (part->chosen() && part->chosen()->micro_batches() > 1)
      planned = part->chosen()->micro_batches();
  int want = requested > 0 ? requested : planned;
  if (want > 1 && (allReduce || stages < 2)) {
    if (requested > 0)
      return invalidArgument("micro-batches " + std::to_string(requested) +
                             ": only a pipeline without tensor parallelism runs them (this "
                             "plan has " + std::to_string(stages) + " stage(s)" +
                             (allReduce ? " and all-reduces" : "") + ")");
    want = 1;
  }
  if (want > stages && want > 1) {
    if (requested > 0)
      return invalidArgument("micro-batches " + std::to_string(requested) +
                             ": at most one per pipeline stage (" + std::to_string(stages) + ")");
    want = stages;
  }
  lanes = std::max(1, want);
  if (lanes > 1)
    for (uint32_t bi = 0; bi < p->buckets()->size(); ++bi)
      segments[int(bi)] = segmentsOf(p->buckets()->Get(bi));
  return Status::ok();
}

std::vector<Engine::Impl::Segment> Engine::Impl::segmentsOf(const fb::Bucket *b) {
  std::vector<Segment> out;
  for (uint32_t i = 0; i < b->steps()->size(); ++i) {
    const fb::Step *s = b->steps()->Get(i);
    if (s->op_as_Copy()) {
      out.push_back({-1, i, i + 1});
    } else if (!out.empty() && out.back().device == s->device()) {
      out.back().end = i + 1;
    } else {
      out.push_back({s->device(), i, i + 1});
    }
  }
  return out;
}

Engine::Engine() = default;
Engine::~Engine() = default;

const std::vector<std::pair<std::string, double>> &Engine::loadPhases() const {
  return impl_->loadPhases;
}

StatusOr<std::unique_ptr<Engine>> Engine::create(plan::PlanFile plan, const EngineOptions &options) {
  std::unique_ptr<Engine> e(new Engine());
  e->impl_ = std::make_unique<Impl>(std::move(plan));
  Impl &impl = *e->impl_;
  impl.options = options;
  if (impl.options.planDir.empty())
    impl.options.planDir = impl.file.directory();
  Progress progress = [&impl](const std::string &phase, uint64_t done, uint64_t total) {
    impl.progress(phase, done, total);
  };
  auto last = std::chrono::steady_clock::now();
  auto phase = [&](const char *name) {
    auto now = std::chrono::steady_clock::now();
    impl.loadPhases.emplace_back(name, std::chrono::duration<double>(now - last).count());
    last = now;
  };
  WEFT_RETURN_IF_ERROR(impl.devices.setUp(*impl.p, impl.options));
  phase("GPUs");
  WEFT_RETURN_IF_ERROR(impl.setUpCollectives());
  phase("collectives");
  WEFT_RETURN_IF_ERROR(impl.kernels.load(*impl.p, impl.options, impl.devices, progress));
  phase("kernels");
  WEFT_RETURN_IF_ERROR(impl.allocateBuffers());
  WEFT_RETURN_IF_ERROR(impl.chooseLanes(options.microBatches));
  WEFT_RETURN_IF_ERROR(impl.allocateStaging());
  impl.findBucketDevices();
  phase("buffers");
  WEFT_RETURN_IF_ERROR(loadWeights(*impl.p, impl.options, impl.devices, progress));
  phase("weights");
  for (uint32_t i = 0; i < impl.p->buckets()->size(); ++i)
    (impl.p->buckets()->Get(i)->prefill() ? impl.prefill : impl.decode).push_back(int(i));
  auto byTokens = [&](int a, int b) { return e->bucketTokens(a) < e->bucketTokens(b); };
  std::sort(impl.prefill.begin(), impl.prefill.end(), byTokens);
  std::sort(impl.decode.begin(), impl.decode.end(), byTokens);
  if (options.warmUp) {
    uint32_t count = impl.p->buckets()->size();
    for (uint32_t i = 0; i < count; ++i) {
      impl.progress("warming up buckets", i, count);
      size_t T = size_t(e->bucketTokens(int(i)));
      StepInputs in;
      in.ids.assign(T, 0);
      in.positions.assign(T, 0);
      in.slots.assign(T, serve::kPaddingSlot);
      StepOutputs out;
      WEFT_RETURN_IF_ERROR(impl.run(int(i), in, out));
    }
    impl.progress("warming up buckets", count, count);
    phase("warm-up");
  }
  return e;
}

const plan::fb::Plan &Engine::plan() const { return *impl_->p; }

int Engine::bucketIndex(const std::string &name) const {
  for (uint32_t i = 0; i < impl_->p->buckets()->size(); ++i)
    if (impl_->p->buckets()->Get(i)->name()->str() == name)
      return int(i);
  return -1;
}

const std::vector<int> &Engine::prefillBuckets() const { return impl_->prefill; }
const std::vector<int> &Engine::decodeBuckets() const { return impl_->decode; }
int Engine::bucketTokens(int b) const { return impl_->p->buckets()->Get(uint32_t(b))->tokens(); }
const KvLayout &Engine::kvLayout() const { return impl_->kv.layout(); }
int Engine::vocabSize() const { return impl_->vocab; }

std::vector<int> Engine::stepSizes() const {
  std::set<int> sizes;
  for (const plan::fb::Bucket *b : *impl_->p->buckets())
    sizes.insert(b->tokens());
  return std::vector<int>(sizes.begin(), sizes.end());
}

int Engine::bucketFor(int tokens) const {
  for (const std::vector<int> *list : {&impl_->decode, &impl_->prefill})
    for (int b : *list)
      if (bucketTokens(b) == tokens)
        return b;
  return -1;
}

Status Engine::runStep(const StepInputs &in, StepOutputs &out) {
  WEFT_RETURN_IF_ERROR(launchStep(in));
  return waitStep(out);
}

Status Engine::launchStep(const StepInputs &in) {
  int b = bucketFor(int(in.ids.size()));
  if (b < 0)
    return invalidArgument("no bucket of " + std::to_string(in.ids.size()) + " tokens in the plan");
  return impl_->launch(b, in);
}

Status Engine::waitStep(StepOutputs &out) { return impl_->wait(out); }
int Engine::microBatches() const { return impl_->lanes; }
Status Engine::setBlockTable(int slot, const std::vector<int32_t> &pages) {
  return impl_->kv.tables().set(slot, pages);
}
const std::string &Engine::collectives() const { return impl_->collectives; }

bool planSamples(const plan::fb::Plan &plan) {
  for (const plan::fb::Kernel *k : *plan.kernels())
    if (k->region_kind() && k->region_kind()->str().find("sample") != std::string::npos)
      return true;
  return false;
}

bool Engine::samples() const { return planSamples(*impl_->p); }

Status Engine::run(int bucket, const StepInputs &in, StepOutputs &out) {
  if (bucket < 0 || uint32_t(bucket) >= impl_->p->buckets()->size())
    return invalidArgument("no bucket " + std::to_string(bucket));
  return impl_->run(bucket, in, out);
}

} // namespace weft::engine

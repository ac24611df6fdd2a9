// Running the plan's buckets (CUDA graphs or step by step: launches, GEMMs,
// copies, all-reduces), and the Engine that sets every piece up for them.
#include "runtime/engine/Engine.h"

#include "runtime/engine/Devices.h"
#include "runtime/engine/KernelTable.h"
#include "runtime/engine/KvCache.h"
#include "runtime/engine/WeightLoader.h"
#include "runtime/gpu/Cuda.h"
#include "runtime/gpu/Gemm.h"
#include "runtime/gpu/Nccl.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace weft::engine {

namespace fb = ::weft::plan::fb;

namespace {

cudaDataType_t cudaType(fb::DType t) {
  switch (t) {
  case fb::DType::F16: return CUDA_R_16F;
  case fb::DType::BF16: return CUDA_R_16BF;
  case fb::DType::F32: return CUDA_R_32F;
  default: return CUDA_R_16F;
  }
}

} // namespace

struct Engine::Impl {
  plan::PlanFile file;
  const fb::Plan *p = nullptr;
  EngineOptions options;
  int maxTokens = 1;
  int vocab = 0;
  std::vector<int> prefill, decode;

  // Members are destroyed in reverse order: after ~Impl has destroyed the
  // graphs and communicators, the devices free their memory, events and
  // streams, and the kernels' modules unload last.
  KernelTable kernels;
  DeviceSet devices;
  KvCacheManager kv;
  std::map<int, cudaGraphExec_t> graphs;           // bucket -> replayable steps
  std::set<int> uncapturable; // buckets run step by step (NCCL, or a failed capture)
  // NCCL communicators of each tensor-parallel group (by its devices);
  // groups without an entry reduce through peer copies.
  const gpu::Nccl *nccl = nullptr;
  std::map<std::vector<int>, std::vector<gpu::NcclComm>> comms;
  std::string collectives = "none";

  explicit Impl(plan::PlanFile f) : file(std::move(f)) { p = &file.plan(); }

  ~Impl() {
    for (Device &d : devices) {
      cudaSetDevice(d.gpu);
      cudaStreamSynchronize(d.stream);
    }
    freeLogitStaging();
    for (auto &[bucket, g] : graphs)
      cudaGraphExecDestroy(g);
    for (auto &[key, g] : segmentGraphs)
      cudaGraphExecDestroy(g);
    for (cudaEvent_t e : copyEvents)
      if (e)
        cudaEventDestroy(e);
    for (auto &[group, list] : comms)
      for (gpu::NcclComm c : list)
        nccl->destroy(c);
  }

  void progress(const std::string &phase, uint64_t done, uint64_t total) {
    if (options.progress)
      options.progress(phase, done, total);
  }

  // A communicator per tensor-parallel group whose devices are distinct
  // GPUs, when NCCL loads and is allowed.
  Status setUpCollectives() {
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
    // Buckets with NCCL all-reduces stay step by step: captured, Llama 3.1
    // 8B TP over two H200s took 5.18 ms per token against 4.96 launched.
    for (uint32_t bi = 0; bi < p->buckets()->size(); ++bi)
      for (const fb::Step *s : *p->buckets()->Get(bi)->steps())
        if (const fb::AllReduce *r = s->op_as_AllReduce())
          if (comms.count(std::vector<int>(r->devices()->begin(), r->devices()->end())))
            uncapturable.insert(int(bi));
    collectives = comms.size() == groups.size()
                      ? "NCCL " + nccl->version()
                      : comms.empty() ? "peer copies (" + why + ")"
                                      : "NCCL " + nccl->version() + " and peer copies (" + why + ")";
    return Status::ok();
  }

  // Each device's activation arena, token inputs and logits, then its
  // part of the KV cache.
  Status allocateBuffers() {
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

  StatusOr<uint64_t> pointer(const fb::Bucket *b, int device, const fb::Arg *a) {
    Device &dev = devices[size_t(device)];
    switch (a->kind()) {
    case fb::ArgKind::Buffer: {
      for (const fb::DeviceBuffers *db : *b->devices())
        if (db->device() == device)
          return uint64_t(reinterpret_cast<uintptr_t>(dev.arena)) +
                 db->buffers()->Get(uint32_t(a->index()))->offset() + a->offset();
      return internalError("buffer on a device without buffers");
    }
    case fb::ArgKind::Weight:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.weights[size_t(a->index())])) + a->offset();
    case fb::ArgKind::KCache:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.kCache[size_t(a->index())]));
    case fb::ArgKind::VCache:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.vCache[size_t(a->index())]));
    case fb::ArgKind::Input:
      return uint64_t(reinterpret_cast<uintptr_t>(dev.inputs[a->index()])) + a->offset();
    case fb::ArgKind::Scalar:
      return uint64_t(a->value());
    }
    return internalError("unknown argument kind");
  }

  // Which devices each bucket uses, and the one whose head writes the
  // next tokens (and holds the logits).
  struct BucketDevices {
    std::set<int> used;
    int output = -1;
  };
  std::vector<BucketDevices> bucketDevices;

  void findBucketDevices() {
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

  // Pinned host memory of one step in flight: its inputs on the way in,
  // a copy of the block tables, its tokens and logits on the way back.
  // One slot per step in flight: the host fills one while the GPU reads
  // the others.
  static constexpr int kStagedInputs = 7;
  struct HostStage {
    int32_t *inputs = nullptr; // kStagedInputs arrays of maxTokens
    int32_t *next = nullptr;   // maxTokens
    int32_t *tables = nullptr; // the block tables
    float *logits = nullptr;   // logitCapacity rows of vocab
    size_t logitCapacity = 0;
  };
  std::vector<HostStage> stages;
  int nextStage = 0;
  struct InFlight {
    int bucket = -1, stage = 0;
    size_t tokens = 0, logitRows = 0;
  };
  std::deque<InFlight> inFlight;
  // Recent launches, newest first (as many as may be fed from): their
  // token counts, the device whose head sampled them, and their slot,
  // whose copy of the sampled tokens stays on that device (savedNext).
  struct Launch {
    size_t tokens = 0;
    int outputDevice = 0, stage = 0;
  };
  std::deque<Launch> recent;
  // Micro-batches in flight through a pipeline (1: steps run one after
  // the other on all devices).
  int lanes = 1;
  // Pipelined buckets run as per-device segments: a graph (or the steps)
  // of one device's consecutive work, and the copies between devices.
  struct Segment {
    int device = -1;            // -1: the copy step `begin`
    uint32_t begin = 0, end = 0; // steps [begin, end)
  };
  std::map<int, std::vector<Segment>> segments; // bucket -> segments, when pipelined
  std::map<std::pair<int, size_t>, cudaGraphExec_t> segmentGraphs;
  // Per device: events recorded after the last launch's copies that read
  // its memory; its next launch waits for them before overwriting it.
  std::vector<std::vector<cudaEvent_t>> readsOf;
  std::vector<cudaEvent_t> copyEvents; // by copy ordinal within a launch
  std::vector<int> copyEventDevice;
  size_t copyOrdinal = 0;

  Status allocateStaging() {
    size_t tableInts = kv.tables().data().size();
    stages.assign(size_t(lanes + 1), HostStage());
    for (HostStage &hs : stages) {
      StatusOr<void *> in = devices.allocateHost(0, uint64_t(maxTokens) * 4 * kStagedInputs, "inputs");
      if (!in.isOk()) return in.status();
      StatusOr<void *> next = devices.allocateHost(0, uint64_t(maxTokens) * 4, "next tokens");
      if (!next.isOk()) return next.status();
      StatusOr<void *> tables = devices.allocateHost(0, tableInts * 4, "block tables");
      if (!tables.isOk()) return tables.status();
      hs.inputs = static_cast<int32_t *>(*in);
      hs.next = static_cast<int32_t *>(*next);
      hs.tables = static_cast<int32_t *>(*tables);
    }
    // Each slot's sampled tokens, kept on every device that may sample,
    // and the events that mark each slot's step done on each device.
    for (size_t d = 0; d < devices.size(); ++d) {
      WEFT_CUDA(cudaSetDevice(devices[d].gpu), "cudaSetDevice");
      while (devices[d].stepDone.size() < stages.size()) {
        cudaEvent_t e = nullptr;
        WEFT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
        devices[d].stepDone.push_back(e);
      }
      devices[d].savedNext.clear();
      for (size_t k = 0; k < stages.size(); ++k) {
        StatusOr<void *> saved = devices.allocate(int(d), uint64_t(maxTokens) * 4, "sampled tokens");
        if (!saved.isOk()) return saved.status();
        devices[d].savedNext.push_back(*saved);
      }
    }
    readsOf.assign(devices.size(), {});
    return Status::ok();
  }

  // Micro-batches: `requested` (0: the plan's choice, partition.chosen.
  // micro_batches), for a pipeline whose buckets have no all-reduce and
  // at most one per stage.
  Status chooseLanes(int requested) {
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

  // A bucket's steps as runs of one device's work and the copies between.
  static std::vector<Segment> segmentsOf(const fb::Bucket *b) {
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

  void freeLogitStaging() {
    for (HostStage &hs : stages)
      if (hs.logits)
        cudaFreeHost(hs.logits);
  }

  Status run(int bi, const StepInputs &in, StepOutputs &out) {
    WEFT_RETURN_IF_ERROR(launch(bi, in));
    return wait(out);
  }

  // Checks a step, stages its inputs, and puts its copies and kernels on
  // the streams; returns without waiting for the GPU.
  Status launch(int bi, const StepInputs &in) {
    const fb::Bucket *b = p->buckets()->Get(uint32_t(bi));
    size_t T = size_t(b->tokens());
    std::string where = "bucket " + b->name()->str();
    if (inFlight.size() >= stages.size())
      return failedPrecondition(where + ": launched with " + std::to_string(inFlight.size()) +
                                " steps not yet waited for");
    if (in.ids.size() != T || in.positions.size() != T || in.slots.size() != T)
      return invalidArgument(where + ": expects " + std::to_string(T) + " tokens");
    for (size_t n : {in.temperature.size(), in.topP.size(), in.uniform.size(), in.topK.size()})
      if (n != 0 && n != T)
        return invalidArgument(where + ": sampling parameters for " + std::to_string(n) +
                               " tokens, expected " + std::to_string(T));
    std::vector<size_t> launched;
    for (size_t a = 0; a + 1 < stages.size() && a < recent.size(); ++a)
      launched.push_back(recent[a].tokens);
    Status feedOk = serve::checkFeed(in, launched);
    if (!feedOk.isOk())
      return Status(feedOk.code(), where + ": " + feedOk.message());
    for (size_t i = 0; i < in.logitRows.size(); ++i)
      if (in.logitRows[i] < 0 || size_t(in.logitRows[i]) >= T)
        return invalidArgument(where + ": logits of row " + std::to_string(in.logitRows[i]) +
                               " of " + std::to_string(T));
    // Every index a kernel will follow, checked on the host first.
    WEFT_RETURN_IF_ERROR(kv.tables().check(where, in, vocab));
    const BucketDevices &bd = bucketDevices[size_t(bi)];
    const std::set<int> &used = bd.used;
    if (bd.output < 0)
      return internalError(where + ": no step writes the next tokens");
    int stage = nextStage;
    HostStage &hs = stages[size_t(stage)];
    size_t rows = in.logitRows.size();
    if (rows > hs.logitCapacity) {
      size_t want = std::max(rows, hs.logitCapacity * 2);
      if (hs.logits)
        cudaFreeHost(hs.logits);
      hs.logits = nullptr;
      hs.logitCapacity = 0;
      WEFT_CUDA(cudaSetDevice(devices[size_t(bd.output)].gpu), "cudaSetDevice");
      void *ptr = nullptr;
      WEFT_CUDA(cudaMallocHost(&ptr, want * size_t(vocab) * 4), where + ": pinning logits");
      hs.logits = static_cast<float *>(ptr);
      hs.logitCapacity = want;
    }
    // The inputs into this step's pinned slot: the copies below read it
    // after launch returns, and the next launch fills the other slot.
    const std::vector<int32_t> *ints[] = {&in.ids, &in.positions, &in.slots, &in.topK};
    const std::vector<float> *floats[] = {&in.temperature, &in.topP, &in.uniform};
    for (int k = 0; k < 4; ++k)
      if (!ints[k]->empty())
        std::memcpy(hs.inputs + size_t(k) * size_t(maxTokens), ints[k]->data(), T * 4);
    for (int k = 0; k < 3; ++k)
      if (!floats[k]->empty())
        std::memcpy(hs.inputs + size_t(4 + k) * size_t(maxTokens), floats[k]->data(), T * 4);
    const fb::InputKind kinds[] = {fb::InputKind::TokenIds, fb::InputKind::Positions,
                                   fb::InputKind::Slots, fb::InputKind::TopK,
                                   fb::InputKind::Temperature, fb::InputKind::TopP,
                                   fb::InputKind::Uniform};
    bool tablesCopied = false;
    // Runs of fed tokens: (age, first row here, first row there, count).
    std::vector<std::array<size_t, 4>> feeds;
    for (size_t t = 0; t < in.feed.size(); ++t)
      if (in.feed[t] >= 0) {
        size_t age = in.feedAge.empty() ? 1 : size_t(in.feedAge[t]);
        size_t src = size_t(in.feed[t]);
        if (!feeds.empty() && feeds.back()[0] == age && feeds.back()[1] + feeds.back()[3] == t &&
            feeds.back()[2] + feeds.back()[3] == src)
          ++feeds.back()[3];
        else
          feeds.push_back({age, t, src, 1});
      }
    Device &od = devices[size_t(bd.output)];
    // What the last launch's copies still read of a device's memory is
    // read before this launch overwrites it (pipelined buckets only).
    std::vector<std::vector<cudaEvent_t>> reads;
    reads.swap(readsOf);
    readsOf.assign(devices.size(), {});
    copyOrdinal = 0;
    for (int d : used) {
      Device &dev = devices[size_t(d)];
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      for (cudaEvent_t e : reads[size_t(d)])
        WEFT_CUDA(cudaStreamWaitEvent(dev.stream, e, 0), where + ": waiting for copies");
      if (kv.stale(size_t(d))) {
        if (!tablesCopied) {
          const std::vector<int32_t> &rowsNow = kv.tables().data();
          std::memcpy(hs.tables, rowsNow.data(), rowsNow.size() * 4);
          tablesCopied = true;
        }
        WEFT_RETURN_IF_ERROR(kv.upload(dev, size_t(d), hs.tables, where));
      }
      for (int k = 0; k < kStagedInputs; ++k) {
        bool given = k < 4 ? !ints[k]->empty() : !floats[k - 4]->empty();
        if (given)
          WEFT_CUDA(cudaMemcpyAsync(dev.inputs[int(kinds[k])],
                                    hs.inputs + size_t(k) * size_t(maxTokens), T * 4,
                                    cudaMemcpyHostToDevice, dev.stream),
                    where + ": inputs");
      }
      // Fed tokens come from an earlier step's copy of its sampled tokens,
      // on the device whose head sampled them.
      for (const auto &f : feeds) {
        const Launch &from = recent[f[0] - 1];
        Device &src = devices[size_t(from.outputDevice)];
        WEFT_CUDA(cudaStreamWaitEvent(dev.stream, src.stepDone[size_t(from.stage)], 0),
                  where + ": waiting for an earlier step's tokens");
        auto *saved = static_cast<int32_t *>(src.savedNext[size_t(from.stage)]);
        auto *to = static_cast<int32_t *>(dev.inputs[int(fb::InputKind::TokenIds)]);
        WEFT_CUDA(cudaMemcpyPeerAsync(to + f[1], dev.gpu, saved + f[2], src.gpu, f[3] * 4,
                                      dev.stream),
                  where + ": tokens from an earlier step");
      }
    }
    WEFT_RETURN_IF_ERROR(enqueueSteps(bi, b, where, used, bd.output));
    // Tokens and logits back to the pinned slot, then each stream marks
    // the step's end.
    WEFT_CUDA(cudaSetDevice(od.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaMemcpyAsync(hs.next, od.inputs[int(fb::InputKind::NextTokens)], T * 4,
                              cudaMemcpyDeviceToHost, od.stream), where + ": next tokens");
    WEFT_CUDA(cudaMemcpyAsync(od.savedNext[size_t(stage)], od.inputs[int(fb::InputKind::NextTokens)],
                              T * 4, cudaMemcpyDeviceToDevice, od.stream),
              where + ": saving the next tokens");
    const float *logits = static_cast<const float *>(od.inputs[int(fb::InputKind::Logits)]);
    for (size_t i = 0; i < rows;) {
      size_t j = i + 1;
      while (j < rows && in.logitRows[j] == in.logitRows[j - 1] + 1)
        ++j;
      WEFT_CUDA(cudaMemcpyAsync(hs.logits + i * size_t(vocab),
                                logits + size_t(in.logitRows[i]) * size_t(vocab),
                                (j - i) * size_t(vocab) * 4, cudaMemcpyDeviceToHost, od.stream),
                where + ": logits");
      i = j;
    }
    for (int d : used) {
      WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
      WEFT_CUDA(cudaEventRecord(devices[size_t(d)].stepDone[size_t(stage)],
                                devices[size_t(d)].stream), where);
    }
    inFlight.push_back({bi, stage, T, rows});
    recent.push_front({T, bd.output, stage});
    if (recent.size() > stages.size())
      recent.pop_back();
    nextStage = (nextStage + 1) % int(stages.size());
    return Status::ok();
  }

  // Waits for the oldest step in flight and gives its tokens and logits.
  Status wait(StepOutputs &out) {
    if (inFlight.empty())
      return failedPrecondition("waiting for a step when none was launched");
    InFlight f = inFlight.front();
    inFlight.pop_front();
    const fb::Bucket *b = p->buckets()->Get(uint32_t(f.bucket));
    std::string where = "bucket " + b->name()->str();
    for (int d : bucketDevices[size_t(f.bucket)].used) {
      WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
      WEFT_CUDA(cudaEventSynchronize(devices[size_t(d)].stepDone[size_t(f.stage)]), where);
    }
    const HostStage &hs = stages[size_t(f.stage)];
    out.next.assign(hs.next, hs.next + f.tokens);
    out.logits.assign(hs.logits, hs.logits + f.logitRows * size_t(vocab));
    return Status::ok();
  }

  // A bucket on one device replays a CUDA graph of its steps: the
  // arguments point at fixed buffers, so one recording serves every run.
  // A bucket spanning several devices (pipeline stages, tensor-parallel
  // ranks sharing a GPU) is one graph too: the other devices' streams join
  // the capture from the first one's and rejoin it at the end; copies and
  // the events between streams become graph edges. If a capture fails, the
  // bucket runs step by step from then on. Buckets with NCCL all-reduces
  // start out that way (see setUpCollectives).
  Status enqueueSteps(int bi, const fb::Bucket *b, const std::string &where,
                      const std::set<int> &used, int outputDevice) {
    bool graph = options.cudaGraphs && !uncapturable.count(bi);
    auto pipelined = segments.find(bi);
    if (pipelined != segments.end() && used.size() > 1)
      return enqueueSegments(bi, b, where, pipelined->second, graph);
    if (graph) {
      int rootIndex = *used.begin();
      Device &root = devices[size_t(rootIndex)];
      auto it = graphs.find(bi);
      if (it == graphs.end()) {
        StatusOr<cudaGraphExec_t> exec = capture(b, where, used, rootIndex);
        if (!exec.isOk() && used.size() == 1)
          return exec.status();
        if (exec.isOk())
          it = graphs.emplace(bi, *exec).first;
        else
          uncapturable.insert(bi);
      }
      if (it != graphs.end()) {
        // The inputs were copied on each device's stream: the graph, on the
        // root's stream, waits for them, and every stream waits for it.
        for (int d : used)
          if (d != rootIndex) {
            WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
            WEFT_CUDA(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream), where);
            WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
            WEFT_CUDA(cudaStreamWaitEvent(root.stream, devices[size_t(d)].join, 0), where);
          }
        WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
        WEFT_CUDA(cudaGraphLaunch(it->second, root.stream), where + ": graph launch");
        WEFT_CUDA(cudaEventRecord(root.join, root.stream), where);
        for (int d : used)
          if (d != rootIndex) {
            WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
            WEFT_CUDA(cudaStreamWaitEvent(devices[size_t(d)].stream, root.join, 0), where);
          }
        return Status::ok();
      }
    }
    // Step by step: the output device overwrites the next tokens only
    // after every device has taken the previous ones (fed tokens).
    Device &od = devices[size_t(outputDevice)];
    for (int d : used)
      if (d != outputDevice) {
        WEFT_CUDA(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
        WEFT_CUDA(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream), where);
        WEFT_CUDA(cudaSetDevice(od.gpu), "cudaSetDevice");
        WEFT_CUDA(cudaStreamWaitEvent(od.stream, devices[size_t(d)].join, 0), where);
      }
    return enqueue(b, where);
  }

  // A pipelined bucket: each device's run of steps on its own stream (a
  // graph of its own), the copies between them ordered by events, and no
  // join at the end, so a device starts the next micro-batch's step while
  // the devices after it still work on this one.
  Status enqueueSegments(int bi, const fb::Bucket *b, const std::string &where,
                         const std::vector<Segment> &segs, bool graph) {
    for (size_t k = 0; k < segs.size(); ++k) {
      const Segment &seg = segs[k];
      if (seg.device < 0 || !graph) {
        WEFT_RETURN_IF_ERROR(enqueue(b, where, seg.begin, seg.end, /*trackReads=*/true));
        continue;
      }
      auto key = std::make_pair(bi, k);
      auto it = segmentGraphs.find(key);
      if (it == segmentGraphs.end()) {
        StatusOr<cudaGraphExec_t> exec =
            capture(b, where, {seg.device}, seg.device, seg.begin, seg.end);
        if (!exec.isOk())
          return exec.status();
        it = segmentGraphs.emplace(key, *exec).first;
      }
      Device &dev = devices[size_t(seg.device)];
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaGraphLaunch(it->second, dev.stream), where + ": graph launch");
    }
    return Status::ok();
  }

  // Records the steps of `b` as one graph, captured from `root`'s stream
  // with every other used device's stream joined to the capture.
  StatusOr<cudaGraphExec_t> capture(const fb::Bucket *b, const std::string &where,
                                    const std::set<int> &used, int rootIndex,
                                    uint32_t begin = 0, uint32_t end = UINT32_MAX) {
    Device &root = devices[size_t(rootIndex)];
    WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaStreamBeginCapture(root.stream, cudaStreamCaptureModeThreadLocal),
              where + ": recording a CUDA graph");
    Status st = Status::ok();
    auto step = [&](cudaError_t e, const char *what) {
      if (st.isOk() && e != cudaSuccess)
        st = gpu::cudaStatus(e, where + ": " + what);
    };
    step(cudaEventRecord(root.join, root.stream), "forking the capture");
    for (int d : used)
      if (d != rootIndex) {
        step(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
        step(cudaStreamWaitEvent(devices[size_t(d)].stream, root.join, 0), "forking the capture");
      }
    if (st.isOk())
      st = enqueue(b, where, begin, end);
    for (int d : used)
      if (d != rootIndex && st.isOk()) {
        step(cudaSetDevice(devices[size_t(d)].gpu), "cudaSetDevice");
        step(cudaEventRecord(devices[size_t(d)].join, devices[size_t(d)].stream),
             "joining the capture");
        step(cudaSetDevice(root.gpu), "cudaSetDevice");
        step(cudaStreamWaitEvent(root.stream, devices[size_t(d)].join, 0), "joining the capture");
      }
    cudaSetDevice(root.gpu);
    cudaGraph_t g = nullptr;
    cudaError_t ended = cudaStreamEndCapture(root.stream, &g);
    if (!st.isOk()) {
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      return st;
    }
    WEFT_CUDA(ended, where + ": recording a CUDA graph");
    cudaGraphExec_t exec = nullptr;
    cudaError_t made = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    WEFT_CUDA(made, where + ": instantiating its CUDA graph");
    return exec;
  }

  // Puts every step of `b` on the devices' streams.
  // Steps [begin, end) only; `trackReads`: each copy records when it has
  // read its source (readsOf), for the source device's next launch.
  Status enqueue(const fb::Bucket *b, const std::string &where, uint32_t begin = 0,
                 uint32_t end = UINT32_MAX, bool trackReads = false) {
    std::vector<uint64_t> values;
    std::vector<void *> params;
    for (uint32_t si = begin; si < std::min(end, b->steps()->size()); ++si) {
      const fb::Step *s = b->steps()->Get(si);
      Device &dev = devices[size_t(s->device())];
      std::string at = where + " step " + std::to_string(si) + " (" + s->region()->str() + ")";
      WEFT_CUDA(cudaSetDevice(dev.gpu), "cudaSetDevice");
      if (const fb::Launch *l = s->op_as_Launch()) {
        values.assign(l->args()->size(), 0);
        params.assign(l->args()->size(), nullptr);
        for (uint32_t i = 0; i < l->args()->size(); ++i) {
          StatusOr<uint64_t> v = pointer(b, s->device(), l->args()->Get(i));
          if (!v.isOk()) return v.status();
          values[i] = *v;
          params[i] = &values[i];
        }
        CUfunction fn = dev.functions[l->kernel()];
        if (l->shared_bytes() > 48 * 1024)
          WEFT_CU(devices.driver()->funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        l->shared_bytes()), at);
        WEFT_CU(devices.driver()->launchKernel(fn, uint32_t(l->grid()->Get(0)), uint32_t(l->grid()->Get(1)),
                                  uint32_t(l->grid()->Get(2)), uint32_t(l->block()->Get(0)),
                                  uint32_t(l->block()->Get(1)), uint32_t(l->block()->Get(2)),
                                  uint32_t(l->shared_bytes()),
                                  reinterpret_cast<CUstream>(dev.stream), params.data(), nullptr),
                at);
      } else if (const fb::Gemm *g = s->op_as_Gemm()) {
        gpu::GemmArgs args;
        args.m = g->m();
        args.n = g->n();
        args.k = g->k();
        auto ptr = [&](const fb::Arg *a) -> StatusOr<void *> {
          if (!a) return static_cast<void *>(nullptr);
          StatusOr<uint64_t> v = pointer(b, s->device(), a);
          if (!v.isOk()) return v.status();
          return reinterpret_cast<void *>(uintptr_t(*v));
        };
        StatusOr<void *> A = ptr(g->a()), B = ptr(g->b()), C = ptr(g->c()),
                         bias = ptr(g->bias()), res = ptr(g->residual());
        for (auto *x : {&A, &B, &C, &bias, &res})
          if (!x->isOk()) return x->status();
        args.a = *A;
        args.b = *B;
        args.c = *C;
        args.bias = *bias;
        args.residual = *res;
        args.abType = cudaType(g->dtype());
        args.cType = cudaType(g->c_dtype());
        Status st = dev.gemm->run(args, dev.stream);
        if (!st.isOk())
          return Status(st.code(), at + ": " + st.message());
      } else if (const fb::Copy *c = s->op_as_Copy()) {
        Device &dst = devices[size_t(c->target_device())];
        StatusOr<uint64_t> from = pointer(b, c->source_device(), c->source());
        StatusOr<uint64_t> to = pointer(b, c->target_device(), c->target());
        if (!from.isOk()) return from.status();
        if (!to.isOk()) return to.status();
        WEFT_CUDA(cudaEventRecord(dev.done, dev.stream), at);
        WEFT_CUDA(cudaSetDevice(dst.gpu), "cudaSetDevice");
        WEFT_CUDA(cudaStreamWaitEvent(dst.stream, dev.done, 0), at);
        WEFT_CUDA(cudaMemcpyPeerAsync(reinterpret_cast<void *>(uintptr_t(*to)), dst.gpu,
                                      reinterpret_cast<void *>(uintptr_t(*from)), dev.gpu,
                                      c->bytes(), dst.stream), at);
        if (trackReads) {
          size_t k = copyOrdinal++;
          if (k >= copyEvents.size()) {
            copyEvents.push_back(nullptr);
            copyEventDevice.push_back(-1);
          }
          if (copyEventDevice[k] != c->target_device()) {
            if (copyEvents[k])
              cudaEventDestroy(copyEvents[k]);
            WEFT_CUDA(cudaEventCreateWithFlags(&copyEvents[k], cudaEventDisableTiming), at);
            copyEventDevice[k] = c->target_device();
          }
          WEFT_CUDA(cudaEventRecord(copyEvents[k], dst.stream), at);
          readsOf[size_t(c->source_device())].push_back(copyEvents[k]);
        }
      } else if (const fb::AllReduce *r = s->op_as_AllReduce()) {
        WEFT_RETURN_IF_ERROR(allReduce(b, r, at));
      } else {
        return unimplemented(at + ": unknown step kind");
      }
    }
    return Status::ok();
  }

  // Sums rank i's buffers[i] over the group, in place: one NCCL group call,
  // or (ranks sharing a GPU, no NCCL) copies of every partial to rank 0,
  // the plan's accumulate kernel there, and copies of the total back.
  Status allReduce(const fb::Bucket *b, const fb::AllReduce *r, const std::string &at) {
    std::vector<int> group(r->devices()->begin(), r->devices()->end());
    std::vector<void *> buffers;
    for (uint32_t i = 0; i < group.size(); ++i) {
      StatusOr<uint64_t> v = pointer(b, group[i], r->buffers()->Get(i));
      if (!v.isOk()) return v.status();
      buffers.push_back(reinterpret_cast<void *>(uintptr_t(*v)));
    }
    uint64_t bytes = 0;
    plan::dtypeBytes(r->dtype(), r->count(), bytes);
    auto it = comms.find(group);
    if (it != comms.end()) {
      std::vector<cudaStream_t> streams;
      for (int d : group)
        streams.push_back(devices[size_t(d)].stream);
      gpu::NcclType type = r->dtype() == fb::DType::F16    ? gpu::NcclType::F16
                           : r->dtype() == fb::DType::BF16 ? gpu::NcclType::BF16
                                                           : gpu::NcclType::F32;
      Status st = nccl->allReduce(buffers, r->count(), type, it->second, streams);
      if (!st.isOk())
        return Status(st.code(), at + ": " + st.message());
      return Status::ok();
    }
    Device &root = devices[size_t(group[0])];
    StatusOr<uint64_t> scratchPtr = pointer(b, group[0], r->scratch());
    if (!scratchPtr.isOk()) return scratchPtr.status();
    void *scratch = reinterpret_cast<void *>(uintptr_t(*scratchPtr));
    CUfunction accumulate = root.functions[size_t(r->accumulate_kernel())];
    unsigned blocks = unsigned(std::min<uint64_t>((r->count() + 255) / 256, 1024));
    for (size_t i = 1; i < group.size(); ++i) {
      Device &peer = devices[size_t(group[i])];
      WEFT_CUDA(cudaSetDevice(peer.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaEventRecord(peer.done, peer.stream), at);
      WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamWaitEvent(root.stream, peer.done, 0), at);
      WEFT_CUDA(cudaMemcpyPeerAsync(scratch, root.gpu, buffers[i], peer.gpu, bytes, root.stream),
                at);
      void *params[] = {&buffers[0], &scratch};
      WEFT_CU(devices.driver()->launchKernel(accumulate, blocks, 1, 1, 256, 1, 1, 0,
                                reinterpret_cast<CUstream>(root.stream), params, nullptr),
              at);
    }
    WEFT_CUDA(cudaSetDevice(root.gpu), "cudaSetDevice");
    WEFT_CUDA(cudaEventRecord(root.done, root.stream), at);
    for (size_t i = 1; i < group.size(); ++i) {
      Device &peer = devices[size_t(group[i])];
      WEFT_CUDA(cudaSetDevice(peer.gpu), "cudaSetDevice");
      WEFT_CUDA(cudaStreamWaitEvent(peer.stream, root.done, 0), at);
      WEFT_CUDA(cudaMemcpyPeerAsync(buffers[i], peer.gpu, buffers[0], root.gpu, bytes,
                                    peer.stream),
                at);
    }
    return Status::ok();
  }

};

Engine::Engine() = default;
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::create(plan::PlanFile plan, const EngineOptions &options) {
  std::unique_ptr<Engine> e(new Engine());
  e->impl_ = std::make_unique<Impl>(std::move(plan));
  Impl &impl = *e->impl_;
  impl.options = options;
  Progress progress = [&impl](const std::string &phase, uint64_t done, uint64_t total) {
    impl.progress(phase, done, total);
  };
  WEFT_RETURN_IF_ERROR(impl.devices.setUp(*impl.p, impl.options));
  WEFT_RETURN_IF_ERROR(impl.setUpCollectives());
  WEFT_RETURN_IF_ERROR(impl.kernels.load(*impl.p, impl.options, impl.devices, progress));
  WEFT_RETURN_IF_ERROR(impl.allocateBuffers());
  WEFT_RETURN_IF_ERROR(impl.chooseLanes(options.microBatches));
  WEFT_RETURN_IF_ERROR(impl.allocateStaging());
  impl.findBucketDevices();
  WEFT_RETURN_IF_ERROR(loadWeights(*impl.p, impl.options, impl.devices, progress));
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
int Engine::stepsInFlight() const { return int(impl_->inFlight.size()); }
int Engine::microBatches() const { return impl_->lanes; }
Status Engine::setBlockTable(int slot, const std::vector<int32_t> &pages) {
  return impl_->kv.tables().set(slot, pages);
}
const std::string &Engine::collectives() const { return impl_->collectives; }

bool Engine::samples() const {
  for (const plan::fb::Kernel *k : *impl_->p->kernels())
    if (k->region_kind() && k->region_kind()->str().find("sample") != std::string::npos)
      return true;
  return false;
}

Status Engine::run(int bucket, const StepInputs &in, StepOutputs &out) {
  if (bucket < 0 || uint32_t(bucket) >= impl_->p->buckets()->size())
    return invalidArgument("no bucket " + std::to_string(bucket));
  return impl_->run(bucket, in, out);
}

} // namespace weft::engine

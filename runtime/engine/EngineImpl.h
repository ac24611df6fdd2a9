// The engine's state and the parts of its work, shared by the files that
// do each: Engine.cpp (setting up: devices, collectives, buffers, weights,
// micro-batches, warm-up), StepLaunch.cpp (a step's inputs staged and
// launched, its outputs waited for: the overlap of host and GPU) and
// BucketExecution.cpp (a bucket's steps on the streams: CUDA graphs,
// pipeline segments, kernel launches, GEMMs, copies, all-reduces).
#ifndef WEFT_RUNTIME_ENGINE_ENGINEIMPL_H_
#define WEFT_RUNTIME_ENGINE_ENGINEIMPL_H_

#include "runtime/engine/Devices.h"
#include "runtime/engine/Engine.h"
#include "runtime/engine/KernelTable.h"
#include "runtime/engine/KvCache.h"
#include "runtime/gpu/Cuda.h"
#include "runtime/gpu/Nccl.h"

#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace weft::engine {

namespace fb = ::weft::plan::fb;

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
  std::set<int> uncapturable; // buckets run step by step (their capture failed)
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

  void progress(const std::string &phase, uint64_t done, uint64_t total);
  std::vector<std::pair<std::string, double>> loadPhases;

  // A communicator per tensor-parallel group whose devices are distinct
  // GPUs, when NCCL loads and is allowed.
  Status setUpCollectives();

  // Each device's activation arena, token inputs and logits, then its
  // part of the KV cache.
  Status allocateBuffers();

  // The address a step's argument names on `device`.
  StatusOr<uint64_t> pointer(const fb::Bucket *b, int device, const fb::Arg *a);

  // Which devices each bucket uses, and the one whose head writes the
  // next tokens (and holds the logits).
  struct BucketDevices {
    std::set<int> used;
    int output = -1;
  };
  std::vector<BucketDevices> bucketDevices;

  // Fills bucketDevices from the plan's steps.
  void findBucketDevices();

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

  // A slot per step in flight (lanes + 1): pinned inputs, tokens, tables;
  // each device's saved tokens and step events.
  Status allocateStaging();

  // Micro-batches: `requested` (0: the plan's choice, partition.chosen.
  // micro_batches), for a pipeline whose buckets have no all-reduce and
  // at most one per stage.
  Status chooseLanes(int requested);

  // A bucket's steps as runs of one device's work and the copies between.
  static std::vector<Segment> segmentsOf(const fb::Bucket *b);

  void freeLogitStaging();

  // launch, then wait: one bucket, synchronously (benchmarks, warm-up).
  Status run(int bi, const StepInputs &in, StepOutputs &out);

  // Checks a step, stages its inputs, and puts its copies and kernels on
  // the streams; returns without waiting for the GPU.
  Status launch(int bi, const StepInputs &in);

  // Waits for the oldest step in flight and gives its tokens and logits.
  Status wait(StepOutputs &out);

  // A bucket on one device replays a CUDA graph of its steps: the
  // arguments point at fixed buffers, so one recording serves every run.
  // A bucket spanning several devices (pipeline stages, tensor-parallel
  // ranks sharing a GPU) is one graph too: the other devices' streams join
  // the capture from the first one's and rejoin it at the end; copies and
  // the events between streams become graph edges. If a capture fails, the
  // bucket runs step by step from then on. Buckets with NCCL all-reduces
  // start out that way (see setUpCollectives).
  Status enqueueSteps(int bi, const fb::Bucket *b, const std::string &where,
                      const std::set<int> &used, int outputDevice);

  // A pipelined bucket: each device's run of steps on its own stream (a
  // graph of its own), the copies between them ordered by events, and no
  // join at the end, so a device starts the next micro-batch's step while
  // the devices after it still work on this one.
  Status enqueueSegments(int bi, const fb::Bucket *b, const std::string &where,
                         const std::vector<Segment> &segs, bool graph);

  // Records the steps of `b` as one graph, captured from `root`'s stream
  // with every other used device's stream joined to the capture.
  StatusOr<cudaGraphExec_t> capture(const fb::Bucket *b, const std::string &where,
                                    const std::set<int> &used, int rootIndex,
                                    uint32_t begin = 0, uint32_t end = UINT32_MAX);

  // Puts the steps [begin, end) of `b` on the devices' streams.
  // `trackReads`: each copy records when it has read its source (readsOf),
  // for the source device's next launch.
  Status enqueue(const fb::Bucket *b, const std::string &where, uint32_t begin = 0,
                 uint32_t end = UINT32_MAX, bool trackReads = false);

  // Sums rank i's buffers[i] over the group, in place: one NCCL group call,
  // or (ranks sharing a GPU, no NCCL) copies of every partial to rank 0,
  // the plan's accumulate kernel there, and copies of the total back.
  Status allReduce(const fb::Bucket *b, const fb::AllReduce *r, const std::string &at);
};

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_ENGINEIMPL_H_

// A step on the GPUs without waiting for it: its inputs staged in pinned
// memory (one slot per step in flight), fed tokens copied from where an
// earlier step's head left them, the bucket enqueued, tokens and logits
// copied back, and an event per device to wait for.
#include "runtime/engine/EngineImpl.h"

#include <algorithm>
#include <cstring>

namespace weft::engine {

Status Engine::Impl::allocateStaging() {
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

void Engine::Impl::freeLogitStaging() {
  for (HostStage &hs : stages)
    if (hs.logits)
      cudaFreeHost(hs.logits);
}

Status Engine::Impl::run(int bi, const StepInputs &in, StepOutputs &out) {
  WEFT_RETURN_IF_ERROR(launch(bi, in));
  return wait(out);
}

Status Engine::Impl::launch(int bi, const StepInputs &in) {
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

Status Engine::Impl::wait(StepOutputs &out) {
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

} // namespace weft::engine

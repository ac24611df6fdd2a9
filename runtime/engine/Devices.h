// The plan's declared devices on physical GPUs: each one's stream, events,
// kernels, buffers and memory, held to the capacity the plan declares.
#ifndef WEFT_RUNTIME_ENGINE_DEVICES_H_
#define WEFT_RUNTIME_ENGINE_DEVICES_H_

#include "runtime/base/Status.h"
#include "runtime/engine/Engine.h"
#include "runtime/gpu/Cuda.h"
#include "runtime/gpu/Gemm.h"
#include "runtime/plan/PlanReader.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace weft::engine {

// How loading reports progress; the engine passes one that is never empty.
using Progress = std::function<void(const std::string &phase, uint64_t done, uint64_t total)>;

struct Device {
  int gpu = 0;
  // Kernels launch with programmatic stream serialization (sm_90 and newer,
  // EngineOptions::programmaticLaunch): the next kernel's blocks start
  // while this one ends, and wait in griddepcontrol.wait.
  bool programmaticLaunch = false;
  uint64_t capacity = 0, used = 0; // declared memory (cap), allocated
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  cudaEvent_t join = nullptr; // forks and joins graph captures and launches
  // Recorded at the end of each step in flight (by its staging slot).
  std::vector<cudaEvent_t> stepDone;
  // Each slot's sampled tokens, saved after its step for later steps that
  // take tokens from it (StepInputs::feed).
  std::vector<void *> savedNext;
  // Pinned host memory allocated on this device (staging), freed with it.
  std::vector<void *> hostAllocations;
  std::vector<CUfunction> functions;
  void *arena = nullptr;
  std::vector<void *> weights;
  std::vector<void *> kCache, vCache;
  void *blockTables = nullptr;
  std::map<int, void *> inputs; // InputKind -> buffer
  std::unique_ptr<gpu::GemmRunner> gemm;
  std::vector<void *> allocations;
};

// Every declared device, by index. Freeing happens here, at destruction:
// the memory each device allocated, its cuBLASLt runner, events and stream.
class DeviceSet {
public:
  DeviceSet() = default;
  ~DeviceSet();
  DeviceSet(const DeviceSet &) = delete;
  DeviceSet &operator=(const DeviceSet &) = delete;

  // Maps each declared device to its GPU, checks the GPU can run the
  // plan's code, and creates its stream, events and GEMM runner.
  Status setUp(const plan::fb::Plan &plan, const EngineOptions &options);

  // `bytes` on device `index`, counted against its declared memory; freed
  // with the set.
  StatusOr<void *> allocate(int index, uint64_t bytes, const std::string &what);
  // `bytes` of pinned host memory, for copies that overlap the GPU; freed
  // with the set. Device `index`'s GPU is made current.
  StatusOr<void *> allocateHost(int index, uint64_t bytes, const std::string &what);

  // The driver entry points, resolved by setUp.
  const gpu::Driver *driver() const { return drv_; }

  size_t size() const { return devices_.size(); }
  Device &operator[](size_t i) { return devices_[i]; }
  const Device &operator[](size_t i) const { return devices_[i]; }
  std::vector<Device>::iterator begin() { return devices_.begin(); }
  std::vector<Device>::iterator end() { return devices_.end(); }

private:
  const gpu::Driver *drv_ = nullptr;
  std::vector<Device> devices_;
};

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_DEVICES_H_

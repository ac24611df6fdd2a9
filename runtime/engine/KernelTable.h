// The plan's kernels as loaded CUDA modules: each device's function table,
// filled once at load, and the modules kept until the engine goes.
#ifndef WEFT_RUNTIME_ENGINE_KERNELTABLE_H_
#define WEFT_RUNTIME_ENGINE_KERNELTABLE_H_

#include "runtime/base/Status.h"
#include "runtime/engine/Devices.h"
#include "runtime/engine/Engine.h"
#include "runtime/gpu/Cuda.h"
#include "runtime/plan/PlanReader.h"

#include <map>
#include <utility>

namespace weft::engine {

class KernelTable {
public:
  KernelTable() = default;
  // Unloads every module; the engine destroys its devices first.
  ~KernelTable();
  KernelTable(const KernelTable &) = delete;
  KernelTable &operator=(const KernelTable &) = delete;

  // Loads the kernels each device launches (the GPU's cubin, else PTX when
  // JIT is allowed), once per GPU, into each Device's `functions`.
  Status load(const plan::fb::Plan &plan, const EngineOptions &options, DeviceSet &devices,
              const Progress &progress);

private:
  const gpu::Driver *drv_ = nullptr;
  std::map<std::pair<int, int>, CUmodule> modules_; // (gpu, kernel)
};

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_KERNELTABLE_H_

// Weights onto the devices that hold them: from the checkpoint the plan's
// manifest names (sharded for tensor parallelism), or random for benchmarks.
#ifndef WEFT_RUNTIME_ENGINE_WEIGHTLOADER_H_
#define WEFT_RUNTIME_ENGINE_WEIGHTLOADER_H_

#include "runtime/base/Status.h"
#include "runtime/engine/Devices.h"
#include "runtime/engine/Engine.h"
#include "runtime/plan/PlanReader.h"

namespace weft::engine {

// Allocates every weight of the plan's manifest on its devices (each
// Device's `weights`, by manifest index) and fills it: from
// options.weightsDir, whose safetensors headers must be the ones the plan
// was compiled against unless options.skipHeaderChecksums, or with random
// values when options.randomWeights.
// Where a source file of the manifest is: in the checkpoint directory, or
// beside the plan.
std::string sourcePath(const plan::fb::SourceFile &f, const EngineOptions &options);

Status loadWeights(const plan::fb::Plan &plan, const EngineOptions &options,
                   DeviceSet &devices, const Progress &progress);

} // namespace weft::engine

#endif // WEFT_RUNTIME_ENGINE_WEIGHTLOADER_H_

// weft-run --bench beside the cost model: each bucket's measured step time
// against the plan's prediction, and the measured-over-predicted step
// scales written back into a topology file's calibration blocks
// (--write-calibration), for weft-compile to plan with.
#ifndef WEFT_TOOLS_WEFT_RUN_BENCHCALIBRATION_H_
#define WEFT_TOOLS_WEFT_RUN_BENCHCALIBRATION_H_

#include "runtime/base/Status.h"
#include "runtime/plan/PlanReader.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::benchcal {

// The plan's prediction for a bucket at a context (decode: interpolated
// linearly between the stored contexts, the nearest outside them; prefill:
// its one entry), or none when the plan holds no predictions.
struct Predicted {
  double seconds = 0, rawOther = 0, rawAttention = 0;
};
std::optional<Predicted> predictionFor(const plan::fb::Bucket &bucket, int64_t context);

struct Measurement {
  bool prefill = false;
  int64_t tokens = 0, context = 0;
  double seconds = 0; // measured per step
  Predicted predicted;
};

struct Scale {
  int64_t tokens = 0;
  double weights = 1, attention = 1;
};

// Per token count: the weights and attention scales that make the raw
// predictions best match the measurements (least squares in relative error
// over the contexts measured; with one context, one scale for both).
std::vector<Scale> fitScales(const std::vector<Measurement> &measurements, bool prefill);

// Writes the scales into every device entry of the topology JSON at `path`
// ("calibration": {"steps", "prefill_steps"}), creating the block with the
// GPU's name, driver and date where there is none. The file must describe
// as many devices as the plan. Keeps every other field.
Status writeCalibration(const std::string &path, int planDevices, const std::string &gpuName,
                        const std::string &driver, const std::vector<Scale> &decode,
                        const std::vector<Scale> &prefill);

} // namespace weft::benchcal

#endif // WEFT_TOOLS_WEFT_RUN_BENCHCALIBRATION_H_

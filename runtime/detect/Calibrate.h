// weft-detect --calibrate: measures on the box what the cost model would
// otherwise take from datasheets: per GPU the device-to-device copy
// bandwidth, the FP16 GEMM rate of cuBLASLt at prefill shapes, the time per
// kernel node replayed in a CUDA graph and the host-to-device bandwidth;
// per GPU pair the peer-to-peer bandwidth and latency. Runtime side (cudart,
// cuBLASLt), no LLVM.
#ifndef WEFT_RUNTIME_DETECT_CALIBRATE_H_
#define WEFT_RUNTIME_DETECT_CALIBRATE_H_

#include "runtime/base/Status.h"
#include "runtime/detect/Detect.h"

#include <functional>
#include <string>
#include <vector>

namespace weft::detect {

// Measures every GPU of `detection`, matched to CUDA devices by PCI bus id.
// `progress(what)` is told what is being measured.
StatusOr<Calibration> calibrate(const Detection &detection,
                                const std::function<void(const std::string &)> &progress);

} // namespace weft::detect

#endif // WEFT_RUNTIME_DETECT_CALIBRATE_H_

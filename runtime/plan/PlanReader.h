// Reading a plan file: FlatBuffers verification, then the semantic checks the
// verifier cannot make (indices, sizes, layer coverage), so the runtime can
// use every index and size in an accepted plan without further checks.
#ifndef WEFT_RUNTIME_PLAN_PLANREADER_H_
#define WEFT_RUNTIME_PLAN_PLANREADER_H_

#include "runtime/base/Status.h"
#include "runtime/plan/Fnv1a.h"
#include "runtime/plan/PlanSeal.h"
#include "runtime/plan/plan_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::plan {

// Plan.version this reader accepts; any other value is rejected.
inline constexpr uint32_t kPlanFormatVersion = 5; // 3: the seal; 4: kernel metadata; 5: cooperative kernels

// The FlatBuffers file identifier (plan.fbs `file_identifier`).
inline constexpr char kPlanFileIdentifier[] = "WEFT";

// 4-byte root offset + 4-byte identifier.
inline constexpr size_t kMinPlanFileSize = 8;

// Largest rank accepted for a tensor shape; real weights have rank <= 3.
inline constexpr size_t kMaxPlanRank = 16;

// A verified plan and the bytes it lives in. Moving keeps plan() valid (the
// vector's storage moves with it).
class PlanFile {
public:
  // Reads the whole file and checks it: FlatBuffers structure, version,
  // the seal (checksum, and signer under `seal`), then every semantic
  // rule. Errors start with `path`.
  static StatusOr<PlanFile> open(const std::string &path, const SealPolicy &seal = {});
  // Checks `bytes` the same way; errors start with `displayName`.
  static StatusOr<PlanFile> fromBytes(std::vector<uint8_t> bytes, std::string displayName,
                                      const SealPolicy &seal = {});

  PlanFile(PlanFile &&) noexcept = default;
  PlanFile &operator=(PlanFile &&) noexcept = default;
  PlanFile(const PlanFile &) = delete;
  PlanFile &operator=(const PlanFile &) = delete;

  const fb::Plan &plan() const { return *fb::GetPlan(bytes_.data()); }
  const std::vector<uint8_t> &bytes() const { return bytes_; }
  const std::string &displayName() const { return displayName_; }
  // The directory of the file it was opened from ("." for a relative name
  // without one; empty for fromBytes): where files written beside the plan
  // are.
  const std::string &directory() const { return directory_; }

private:
  PlanFile(std::vector<uint8_t> bytes, std::string displayName)
      : bytes_(std::move(bytes)), displayName_(std::move(displayName)) {}

  std::vector<uint8_t> bytes_;
  std::string displayName_;
  std::string directory_;
};

// Bytes per element of `dtype` times `elements`, rounded up (I4 packs two per
// byte); false on overflow or an unknown dtype.
bool dtypeBytes(fb::DType dtype, uint64_t elements, uint64_t &bytes);

} // namespace weft::plan

#endif // WEFT_RUNTIME_PLAN_PLANREADER_H_

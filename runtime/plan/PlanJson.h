// Text views of a plan: a complete JSON rendering (for tests and tools) and a
// human summary (what weft-inspect prints by default).
#ifndef WEFT_RUNTIME_PLAN_PLANJSON_H_
#define WEFT_RUNTIME_PLAN_PLANJSON_H_

#include "runtime/plan/PlanSeal.h"
#include "runtime/plan/plan_generated.h"

#include <optional>
#include <string>

namespace weft::plan {

// Every field of every table, in schema order, pretty-printed with a trailing
// newline; the same plan always gives the same text. Enums appear by name,
// checksums and hashes as "0x%016x" strings, cubins as {bytes, fnv1a64}, PTX
// and tokenizer_json as their byte counts. Absent tables are null, absent
// strings "" and absent vectors []. Meant for plans PlanFile accepted, but
// safe on any verified buffer.
std::string planToJson(const fb::Plan &plan);

// Model, topology, partition (stages, chosen prediction, runners-up, the
// memory-proportional baseline), memory per device, kernels and buckets.
// The seal line says what `signature` found (signatureState); without it,
// that the signature was not checked.
std::string planSummary(const fb::Plan &plan,
                        std::optional<SignatureState> signature = std::nullopt);

} // namespace weft::plan

#endif // WEFT_RUNTIME_PLAN_PLANJSON_H_

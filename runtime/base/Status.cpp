// Names of status codes, for messages and the C API.
#include "runtime/base/Status.h"

namespace weft {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk: return "ok";
  case StatusCode::kInvalidArgument: return "invalid argument";
  case StatusCode::kNotFound: return "not found";
  case StatusCode::kOutOfRange: return "out of range";
  case StatusCode::kUnimplemented: return "unimplemented";
  case StatusCode::kFailedPrecondition: return "failed precondition";
  case StatusCode::kResourceExhausted: return "resource exhausted";
  case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

} // namespace weft

// The default asynchronous interface of a StepRunner: the step runs inside
// launchStep, its outputs wait in a queue for waitStep.
#include "runtime/serve/Step.h"

#include <string>

namespace weft::serve {

Status checkFeed(const StepInputs &in, size_t previousTokens) {
  if (in.feed.empty())
    return Status::ok();
  if (in.feed.size() != in.ids.size())
    return invalidArgument("feed rows for " + std::to_string(in.feed.size()) +
                           " tokens in a step of " + std::to_string(in.ids.size()));
  for (size_t t = 0; t < in.feed.size(); ++t)
    if (in.feed[t] != -1 && (in.feed[t] < 0 || size_t(in.feed[t]) >= previousTokens))
      return invalidArgument("token " + std::to_string(t) + " takes row " +
                             std::to_string(in.feed[t]) + " of the previous step, which has " +
                             std::to_string(previousTokens) + " tokens");
  return Status::ok();
}

Status StepRunner::launchStep(const StepInputs &in) {
  if (int(finished_.size()) >= kMaxStepsInFlight)
    return failedPrecondition("a step was launched with " + std::to_string(kMaxStepsInFlight) +
                              " steps not yet waited for");
  WEFT_RETURN_IF_ERROR(checkFeed(in, lastNext_.size()));
  const StepInputs *run = &in;
  StepInputs resolved;
  if (!in.feed.empty()) {
    resolved = in;
    for (size_t t = 0; t < in.feed.size(); ++t)
      if (in.feed[t] >= 0)
        resolved.ids[t] = lastNext_[size_t(in.feed[t])];
    resolved.feed.clear();
    run = &resolved;
  }
  StepOutputs out;
  WEFT_RETURN_IF_ERROR(runStep(*run, out));
  lastNext_ = out.next;
  finished_.push_back(std::move(out));
  return Status::ok();
}

Status StepRunner::waitStep(StepOutputs &out) {
  if (finished_.empty())
    return failedPrecondition("waiting for a step when none was launched");
  out = std::move(finished_.front());
  finished_.erase(finished_.begin());
  return Status::ok();
}

} // namespace weft::serve

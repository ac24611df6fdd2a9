// The default asynchronous interface of a StepRunner: the step runs inside
// launchStep, its outputs wait in a queue for waitStep.
#include "runtime/serve/Step.h"

#include <string>

namespace weft::serve {

Status checkFeed(const StepInputs &in, const std::vector<size_t> &launchedTokens) {
  if (in.feed.empty()) {
    if (!in.feedAge.empty())
      return invalidArgument("feed ages without feed rows");
    return Status::ok();
  }
  if (in.feed.size() != in.ids.size())
    return invalidArgument("feed rows for " + std::to_string(in.feed.size()) +
                           " tokens in a step of " + std::to_string(in.ids.size()));
  if (!in.feedAge.empty() && in.feedAge.size() != in.ids.size())
    return invalidArgument("feed ages for " + std::to_string(in.feedAge.size()) +
                           " tokens in a step of " + std::to_string(in.ids.size()));
  for (size_t t = 0; t < in.feed.size(); ++t) {
    if (in.feed[t] == -1)
      continue;
    int age = in.feedAge.empty() ? 1 : in.feedAge[t];
    if (age < 1 || size_t(age) > launchedTokens.size())
      return invalidArgument("token " + std::to_string(t) + " takes a token from " +
                             std::to_string(age) + " steps back; " +
                             std::to_string(launchedTokens.size()) + " can be read");
    size_t tokens = launchedTokens[size_t(age - 1)];
    if (in.feed[t] < 0 || size_t(in.feed[t]) >= tokens)
      return invalidArgument("token " + std::to_string(t) + " takes row " +
                             std::to_string(in.feed[t]) + " of the step " + std::to_string(age) +
                             " back, which has " + std::to_string(tokens) + " tokens");
  }
  return Status::ok();
}

Status StepRunner::launchStep(const StepInputs &in) {
  if (int(finished_.size()) >= maxStepsInFlight())
    return failedPrecondition("a step was launched with " + std::to_string(maxStepsInFlight()) +
                              " steps not yet waited for");
  std::vector<size_t> launched;
  for (size_t a = 0; a + 1 < size_t(maxStepsInFlight()) && a < history_.size(); ++a)
    launched.push_back(history_[a].size());
  WEFT_RETURN_IF_ERROR(checkFeed(in, launched));
  const StepInputs *run = &in;
  StepInputs resolved;
  if (!in.feed.empty()) {
    resolved = in;
    for (size_t t = 0; t < in.feed.size(); ++t)
      if (in.feed[t] >= 0) {
        int age = in.feedAge.empty() ? 1 : in.feedAge[t];
        resolved.ids[t] = history_[size_t(age - 1)][size_t(in.feed[t])];
      }
    resolved.feed.clear();
    resolved.feedAge.clear();
    run = &resolved;
  }
  StepOutputs out;
  WEFT_RETURN_IF_ERROR(runStep(*run, out));
  history_.insert(history_.begin(), out.next);
  if (history_.size() > size_t(maxStepsInFlight()))
    history_.pop_back();
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

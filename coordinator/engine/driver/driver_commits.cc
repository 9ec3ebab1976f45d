// Driver's commits: as the instance's owner (fenced by this process's
// lease), completing a continuation, and what one that did not happen means
// for the driver.
#include <algorithm>

#include "coordinator/engine/driver/driver.h"
#include "policies/failure_policy.h"
#include "util/log.h"

namespace sagad {

auto Driver::AfterFailedCommit(const std::string& id, const Status& s) -> Next {
  if (s.code() == StatusCode::kLeaseLost)
    return Next::kStop;  // another process owns it now: no further calls from
                         // here
  if (s.code() == StatusCode::kMovedOn) return Next::kContinue;
  EngineLog(LogLevel::kError,
            {{"msg", "transition failed"}, {"instance", id}, {"error", s.ToString()}});
  ScheduleAfter(id, NextRetryDelay(id));
  return Next::kStop;
}

auto Driver::NextRetryDelay(const std::string& id) -> int64_t {
  // The delay grows no further than the fourth.
  return RefusedCommitDelayMs(std::min(ownership_.CountRefusedCommit(id), 4));
}

auto Driver::CommitAsOwnerAsync(const std::string& id, Mutation fn, Completion<Status> done)
    -> void {
  std::optional<Lease> lease = ownership_.Held(id);
  if (!lease) {
    done(LeaseLost("lease lost: not the owner of " + id));
    return;
  }
  repo_.MutateAsync(id, std::move(fn), std::move(lease),
                    [this, id, done = std::move(done)](Status s) {
                      // A lost lease takes its refusals' count with it (DropFenced).
                      if (s.code() == StatusCode::kLeaseLost) DropFenced(id);
                      if (s.ok()) ownership_.ClearRefusedCommits(id);
                      done(s);
                    });
}

auto Driver::DropFenced(const std::string& id) -> void {
  ownership_.Release(id);
  EngineLog(LogLevel::kWarn, {{"msg", "lease lost; dropping instance"}, {"instance", id}});
}

}  // namespace sagad

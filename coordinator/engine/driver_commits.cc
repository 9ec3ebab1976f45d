// Driver's commits: as the instance's owner (fenced by this process's
// lease), completing a continuation, and what one that did not happen means
// for the driver.
#include "coordinator/engine/driver.h"
#include "util/log.h"

namespace sagad {

auto Driver::AfterFailedCommit(const std::string& id, const Status& s) -> Next {
  if (s.code() == StatusCode::kLeaseLost)
    return Next::kStop;  // another process owns it now: no further calls from
                         // here
  if (s.code() == StatusCode::kMovedOn) return Next::kContinue;
  EngineLog({{"msg", "transition failed"}, {"instance", id}, {"error", s.ToString()}});
  ScheduleAfter(id, 1000);
  return Next::kStop;
}

auto Driver::CommitAsOwnerAsync(const std::string& id, std::function<Status(Tx&)> fn,
                                std::function<void(Status)> done, CommitThen then) -> void {
  std::optional<Lease> lease = ownership_.Held(id);
  if (!lease) {
    done(LeaseLost("lease lost: not the owner of " + id));
    return;
  }
  repo_.MutateAsync(
      id, std::move(fn), std::move(lease),
      [this, id, done = std::move(done)](Status s) {
        if (s.code() == StatusCode::kLeaseLost) DropFenced(id);
        done(s);
      },
      then);
}

auto Driver::DropFenced(const std::string& id) -> void {
  ownership_.Release(id);
  EngineLog({{"msg", "lease lost; dropping instance"}, {"instance", id}});
}

}  // namespace sagad

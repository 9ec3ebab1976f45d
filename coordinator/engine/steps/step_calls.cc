// StepRunner's calls to downstream services: Adapter::CallAsync and
// QueryAsync, and what follows a reply: at once on the caller's thread when
// the adapter answered before it returned; else posted to the instance's
// owner (the thread that brought the reply, an HTTP client's event loop,
// goes back to its sockets). No thread waits for a reply. The actions are
// in step_runner.cc and step_runner_undo.cc; the contract in step_runner.h.
#include <atomic>
#include <thread>

#include "coordinator/engine/steps/step_runner.h"
#include "util/log.h"

namespace sagad {

// The thread that made a call and whether that call has returned: a reply
// on that thread before it returned goes on as the call's own code would
// (an exception reaches the caller); any other is guarded here.
struct StepRunner::Handoff {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> returned{false};
};

auto StepRunner::Continue(const std::shared_ptr<Handoff>& h, const std::string& id,
                          const Done& done, const Task& fn) -> void {
  if (std::this_thread::get_id() == h->caller && !h->returned.load()) {
    fn();  // an exception goes to the caller, as a blocking call's would
    return;
  }
  executor_.PostTo(id, [this, id, done, fn] { Guarded(id, done, fn); });
}

auto StepRunner::Guarded(const std::string& id, const Done& done, const Task& fn) -> void {
  try {
    fn();
  } catch (const std::exception& e) {
    // A bug, not an expected failure: loud, and the instance is planned
    // again rather than left without a driver.
    EngineLog({{"msg", "step task error"}, {"instance", id}, {"error", e.what()}});
    host_.ScheduleAfter(id, 5000);
    done(Next::kStop);
  }
}

auto StepRunner::CallIfOwner(const CallRequest& req, const Done& done, AfterCall k) -> void {
  Status ready = host_.MaySend(req.instance_id);
  if (!ready.ok()) {
    metrics_.SendWithheld();
    EngineLog({{"msg", "not sent: lease"},
               {"instance", req.instance_id},
               {"key", req.idempotency_key},
               {"error", ready.ToString()}});
    k(ready, CallResult{});
    return;
  }
  gates_.CallStarted(req.service);
  runs_.AwaitReply(true);
  auto h = std::make_shared<Handoff>();
  // The lease rule again when the request leaves the service's connection
  // line: a request that waited there while the lease ran low never leaves,
  // nor one made under another lease than the one held now (its fencing
  // token is not the live lease's: found by the simulator, seed 6806, a
  // request made before its process stood still, whose instance another
  // process finished meanwhile and this one took again).
  CallRequest sent = req;
  sent.may_write = [&ownership = ownership_, id = req.instance_id, token = req.fencing_token] {
    SAGAD_RETURN_IF_ERROR(ownership.SendableNow(id));
    const uint64_t now = ownership.Token(id);
    if (now == token) return Status::Ok();
    return LeaseLost("the lease of " + id + " is another one than the request was made under " +
                     "(fencing token " + std::to_string(token) + ", now " + std::to_string(now) +
                     "): withheld at the connection line");
  };
  adapter_.CallAsync(sent, [this, h, id = req.instance_id, key = req.idempotency_key,
                            service = req.service, done, k = std::move(k)](CallResult res) mutable {
    gates_.CallEnded(service);
    runs_.AwaitReply(false);
    if (res.withheld) {
      metrics_.SendWithheld();
      EngineLog({{"msg", "not sent: lease"}, {"instance", id}, {"key", key}, {"error", res.error}});
      Status lost = Unavailable(res.error);  // planned again: reconciled before any re-send
      return Continue(h, id, done, [k = std::move(k), lost]() mutable { k(lost, CallResult{}); });
    }
    Continue(h, id, done, [k = std::move(k), res = std::move(res)]() mutable {
      k(Status::Ok(), std::move(res));
    });
  });
  h->returned = true;
}

auto StepRunner::Ask(const std::string& service, const std::string& key, const std::string& id,
                     int attempt, const TraceContext& trace, const Done& done,
                     Completion<QueryResult> k) -> void {
  auto h = std::make_shared<Handoff>();
  runs_.AwaitReply(true);
  adapter_.QueryAsync(
      service, key, id, ownership_.Token(id), attempt, trace,
      [this, h, id, done, k = std::move(k)](QueryResult q) mutable {
        runs_.AwaitReply(false);
        Continue(h, id, done, [k = std::move(k), q = std::move(q)]() mutable { k(std::move(q)); });
      });
  h->returned = true;
}

}  // namespace sagad

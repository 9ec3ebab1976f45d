// StepRunner's calls to downstream services: Adapter::CallAsync and
// QueryAsync, and what follows a reply: at once on the caller's thread when
// the adapter answered before it returned; else posted to the instance's
// owner (the thread that brought the reply, an HTTP client's event loop,
// goes back to its sockets). No thread waits for a reply. The actions are
// in step_runner.cc and step_runner_undo.cc; the contract in step_runner.h.
#include <atomic>
#include <thread>

#include "adapters/classify.h"
#include "coordinator/engine/steps/step_request.h"
#include "coordinator/engine/steps/step_runner.h"
#include "util/check.h"
#include "util/log.h"

namespace sagad {

// The thread that made a call and whether that call has returned: a reply
// on that thread before it returned goes on as the call's own code would
// (an exception reaches the caller); any other is guarded here.
struct StepRunner::Handoff {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> returned{false};
};

auto StepRunner::Continue(const std::shared_ptr<Handoff>& h, const ActionPtr& a, const Task& fn)
    -> void {
  if (std::this_thread::get_id() == h->caller && !h->returned.load()) {
    fn();  // an exception goes to the caller, as a blocking call's would
    return;
  }
  // A reply handed over resumes on the instance's owner: checked on
  // resumption (the simulator runs this branch as production does).
  Task phase = [this, a, fn] {
    SAGAD_CHECK(executor_.OnOwner(a->id()))
        << "a reply to instance " << a->id() << " resumed off the instance's owner thread";
    fn();
  };
  executor_.PostTo(a->id(), [this, a, phase] { Guarded(a, phase); });
}

auto StepRunner::Guarded(const ActionPtr& a, const Task& fn) -> void {
  try {
    fn();
  } catch (const std::exception& e) {
    // A bug, not an expected failure: loud, and the instance is planned
    // again rather than left without a driver.
    EngineLog(LogLevel::kError,
              {{"msg", "step task error"}, {"instance", a->id()}, {"error", e.what()}});
    host_.ScheduleAfter(a->id(), 5000);
    a->End(Next::kStop);
  }
}

auto StepRunner::CallIfOwner(const ActionPtr& a, const CallRequest& req, Completion<CallResult> k)
    -> void {
  a->Sent(clock_.SteadyNow());
  Status ready = host_.MaySend(req.instance_id);
  if (!ready.ok()) {
    metrics_.SendWithheld();
    EngineLog(LogLevel::kWarn, {{"msg", "not sent: lease"},
                                {"instance", req.instance_id},
                                {"key", req.idempotency_key},
                                {"error", ready.ToString()}});
    Abandon(a, ready);
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
  adapter_.CallAsync(sent, [this, h, a, service = req.service, k = std::move(k)](CallResult res) {
    gates_.CallEnded(service);
    runs_.AwaitReply(false);
    if (res.withheld) {
      metrics_.SendWithheld();
      EngineLog(LogLevel::kWarn, {{"msg", "not sent: lease"},
                                  {"instance", a->id()},
                                  {"key", a->key()},
                                  {"error", res.error}});
      Status lost = Unavailable(res.error);  // planned again: reconciled before any re-send
      return Continue(h, a, [this, a, lost] { Abandon(a, lost); });
    }
    Continue(h, a, [a, k, res = std::move(res)] {
      a->FreePermit();  // the reply is in: the service's slot is free
      k(res);
    });
  });
  h->returned = true;
}

auto StepRunner::RequestFor(const ActionPtr& a, const CallSpec& call, std::string path,
                            nlohmann::json body) -> CallRequest {
  return CallRequest{call.service,
                     call.method,
                     std::move(path),
                     std::move(body),
                     a->key(),
                     a->id(),
                     a->step_def().name,
                     ownership_.Token(a->id()),
                     a->attempt(),
                     a->trace(),
                     {}};
}

auto StepRunner::Abandon(const ActionPtr& a, const Status& why) -> void {
  a->FreePermit();  // first: a step waiting for the service's slot may have it
  a->End(host_.AfterFailedCommit(a->id(), why));
}

auto StepRunner::Ask(const ActionPtr& a, const std::string& service, Completion<QueryResult> k)
    -> void {
  auto h = std::make_shared<Handoff>();
  runs_.AwaitReply(true);
  adapter_.QueryAsync(service, a->key(), a->id(), ownership_.Token(a->id()), a->attempt(),
                      a->trace(), [this, h, a, k = std::move(k)](QueryResult q) {
                        runs_.AwaitReply(false);
                        Continue(h, a, [k, q = std::move(q)] { k(q); });
                      });
  h->returned = true;
}

auto StepRunner::AskByRead(const ActionPtr& a, const Instance& inst, Completion<QueryResult> k)
    -> void {
  const StepDefinition& sd = a->step_def();
  const ReconcileSpec& rec = *sd.reconcile;
  auto r = RenderStepRequest(inst, rec.read);
  if (!r.ok()) {
    QueryResult q;
    q.error = "reconcile read not rendered: " + r.status().message();
    return k(q);
  }
  CallRequest req = RequestFor(a, rec.read, std::move(r->path), std::move(r->body));
  // A read is not the operation: it carries no key (a downstream that
  // deduplicates by key would answer it with the forward's stored reply).
  req.idempotency_key.clear();
  auto h = std::make_shared<Handoff>();
  runs_.AwaitReply(true);
  adapter_.CallAsync(req,
                     [this, h, a, pointer = rec.committed_if, k = std::move(k)](CallResult res) {
                       runs_.AwaitReply(false);
                       Continue(h, a, [k, q = ClassifyReadAnswer(res, pointer)] { k(q); });
                     });
  h->returned = true;
}

}  // namespace sagad

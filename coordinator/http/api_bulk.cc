// Bulk actions (http_api_impl.h): POST /v1/instances/actions/{action} with
// {"ids": [...]} or {"filter": {"saga", "status", "waiting"}, "limit": N},
// and "comment" / "reason". Each instance is judged as its single action
// would be and gets its own result; the answer is 200 with every result,
// given by the continuation of the last action to commit.
#include <algorithm>
#include <map>

#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_api_impl.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

constexpr size_t kMaxBulk = 1000;
constexpr size_t kDefaultBulkLimit = 100;

// The names of the instance's steps in `status` (from its view).
std::vector<std::string> StepsIn(const nlohmann::json& view, const std::string& status) {
  std::vector<std::string> out;
  for (const auto& st : view.value("steps", nlohmann::json::array()))
    if (st.value("status", "") == status) out.push_back(st.value("name", ""));
  return out;
}

// The ids a bulk request names, or those of its filter; false with a 400.
bool Targets(const HttpRequest& req, HttpResponse& res, const nlohmann::json& body, Engine& engine,
             std::vector<std::string>* ids) {
  const bool by_ids = body.contains("ids"), by_filter = body.contains("filter");
  if (by_ids == by_filter) {
    Problem(req, res, 400, "give either \"ids\" (an array) or \"filter\" (an object)");
    return false;
  }
  if (by_ids) {
    const auto& list = body["ids"];
    if (!list.is_array() || list.size() > kMaxBulk ||
        !std::all_of(list.begin(), list.end(), [](const auto& i) { return i.is_string(); })) {
      Problem(req, res, 400, "\"ids\" must be an array of at most 1000 instance ids");
      return false;
    }
    for (const auto& i : list) ids->push_back(i.get<std::string>());
    return true;
  }
  const auto& f = body["filter"];
  Status keys = OnlyKnownKeys(f, {"saga", "status", "waiting"}, "the filter");
  if (!f.is_object() || !keys.ok() ||
      !std::all_of(f.begin(), f.end(), [](const auto& v) { return v.is_string(); })) {
    Problem(req, res, 400, keys.ok() ? "\"filter\" must be an object of strings" : keys.message());
    return false;
  }
  const std::string status = f.value("status", ""), waiting = f.value("waiting", "");
  if (!status.empty() && !IsSagaStatus(status)) {
    Problem(req, res, 400, "the filter's status '" + status + "' is not a saga status");
    return false;
  }
  if (!waiting.empty() && !IsWaitingFor(waiting)) {
    Problem(req, res, 400, "the filter's waiting must be retry, approval or review");
    return false;
  }
  if (status.empty() && waiting.empty() && f.value("saga", "").empty()) {
    Problem(req, res, 400,
            "the filter names nothing: give a saga, a status or what the instances wait for");
    return false;
  }
  size_t limit = kDefaultBulkLimit;
  if (body.contains("limit")) {
    int64_t n = 0;
    if (!AsInt64(body["limit"], &n) || n < 1 || n > int64_t(kMaxBulk)) {
      Problem(req, res, 400, "\"limit\" must be an integer from 1 to 1000");
      return false;
    }
    limit = size_t(n);
  }
  InstanceFilter filter(f.value("status", ""), f.value("saga", ""), f.value("waiting", ""));
  auto page = engine.List(filter, limit, "");
  if (!page.ok()) {
    ProblemFromStatus(req, res, page.status());
    return false;
  }
  for (const auto& i : page->instances) ids->push_back(i.value("id", ""));
  return true;
}

// Counts the actions of a bulk request down; the one that ends last runs
// `then` (at once when there are none). Thread-safety: the actions end on
// any thread.
class Countdown {
 public:
  static std::shared_ptr<Countdown> Start(size_t n, std::function<void()> then) {
    auto c = std::make_shared<Countdown>(n, std::move(then));
    if (n == 0) c->then_();
    return c;
  }
  Countdown(size_t n, std::function<void()> then) : left_(n), then_(std::move(then)) {}
  void One() {
    {
      MutexLock l(mu_);
      if (--left_ > 0) return;
    }
    then_();
  }

 private:
  Mutex mu_;
  size_t left_ GUARDED_BY(mu_);
  const std::function<void()> then_;
};

// What the actions on the steps of one instance came to: ok once one did.
struct Tally {
  Mutex mu;
  int acted GUARDED_BY(mu) = 0;
  Status first_error GUARDED_BY(mu);
};

}  // namespace

size_t ApiServer::Impl::HoldBackOneByOne(const nlohmann::json& view,
                                         std::vector<std::string>* steps) {
  const bool run = view.value("kind", "") == "run";
  SagaDefinitionPtr def =
      run ? nullptr : engine_.Definition(view.value("saga", ""), view.value("saga_version", 0));
  std::vector<std::string> bulk;
  for (const std::string& s : *steps) {
    const StepDefinition* sd = nullptr;
    if (def)
      for (const auto& d : def->steps)
        if (d.name == s) sd = &d;
    if (!run && sd && !sd->irreversible) bulk.push_back(s);
  }
  const size_t held = steps->size() - bulk.size();
  *steps = std::move(bulk);
  return held;
}

void ApiServer::Impl::BulkOne(const std::string& action, const std::string& id,
                              const std::string& who, const std::string& text, BulkDone done) {
  if (action == "cancel") {
    Status s = engine_.Cancel(id, who, text, [done](Status s) { done(s, "cancelled"); });
    if (!s.ok()) done(s, "");  // refused before any commit
    return;
  }
  auto view = engine_.GetInstance(id);
  if (!view.ok()) return done(view.status(), "");
  // approve / reject: every step awaiting approval; retry: every step the
  // saga is at (those waiting on a timer or in review take it).
  std::vector<std::string> steps = action == "retry"
                                       ? view->value("current_steps", std::vector<std::string>{})
                                       : StepsIn(*view, "AWAITING_APPROVAL");
  const size_t held = action == "approve" ? HoldBackOneByOne(*view, &steps) : 0;
  if (steps.empty())
    return done(
        FailedPrecondition(
            action == "retry" ? "no step of the instance can be retried now"
            : held > 0 ? "what awaits approval here is an agent's call or an irreversible step: "
                         "each is approved on its own, with the digest of the request seen "
                         "(POST /v1/approvals/actions/approve or the step's approve)"
                       : "no step of the instance awaits approval"),
        "");
  auto tally = std::make_shared<Tally>();
  auto all = Countdown::Start(steps.size(), [tally, action, done] {
    Status s;
    std::string what;
    {
      MutexLock l(tally->mu);
      s = tally->acted == 0 ? tally->first_error : Status::Ok();
      what = action + ": " + std::to_string(tally->acted) + " step(s)";
    }
    done(s, what);
  });
  for (const auto& step : steps) {
    auto one = [tally, all](Status s) {
      {
        MutexLock l(tally->mu);
        if (s.ok())
          ++tally->acted;
        else if (tally->first_error.ok())
          tally->first_error = s;
      }
      all->One();
    };
    Status s = action == "approve"  ? engine_.Approve(id, step, who, text, one)
               : action == "reject" ? engine_.Reject(id, step, who, text, one)
                                    : engine_.RetryNow(id, step, who, text, one);
    if (!s.ok()) one(s);  // refused before any commit
  }
}

void ApiServer::Impl::ApproveSeen(const HttpRequest& req, HttpResponse& res) {
  std::string who = auth_.Authorize(req, res, Role::kOperator);
  if (who.empty()) return;
  nlohmann::json body;
  std::string comment;
  if (!BodyObject(req, res, &body, false) || !OptionalString(req, res, body, "comment", &comment))
    return;
  if (Status keys = OnlyKnownKeys(body, {"approvals", "comment"}, "the body"); !keys.ok())
    return Problem(req, res, 400, keys.message());
  const nlohmann::json list = body.value("approvals", nlohmann::json());
  auto field = [](const nlohmann::json& a, const char* k) {
    return a.is_object() && a.contains(k) && a[k].is_string() && !a[k].get<std::string>().empty();
  };
  if (!list.is_array() || list.empty() || list.size() > kMaxBulk ||
      !std::all_of(list.begin(), list.end(), [&](const nlohmann::json& a) {
        return field(a, "instance_id") && field(a, "step") && field(a, "digest") &&
               OnlyKnownKeys(a, {"instance_id", "step", "digest"}, "an approval").ok();
      }))
    return Problem(req, res, 400,
                   "\"approvals\" must be an array of 1 to 1000 {\"instance_id\", \"step\", "
                   "\"digest\"} (each as /v1/approvals shows it)");
  // What awaits approval now, and the digest of each request.
  auto cards = engine_.Approvals();
  if (!cards.ok()) return ProblemFromStatus(req, res, cards.status());
  std::map<std::pair<std::string, std::string>, std::string> now;
  for (const auto& c : *cards)
    now[{c.value("instance_id", ""), c.value("step", "")}] =
        c.value("digest", nlohmann::json()).is_string() ? c["digest"].get<std::string>() : "";
  auto answer = DeferredAnswer::Start(res, nullptr);
  auto results = std::make_shared<std::vector<nlohmann::json>>(list.size());
  auto all = Countdown::Start(list.size(), [answer, results, &req] {
    nlohmann::json refused = nlohmann::json::array();
    for (const auto& r : *results)
      if (r.value("http_status", 0) != 200) refused.push_back(r);
    answer->Give([&](HttpResponse& res) {
      if (refused.empty()) return Json(res, 200, {{"results", *results}});
      Problem(req, res, 409,
              std::to_string(refused.size()) + " of " + std::to_string(results->size()) +
                  " approvals were not given (listed in \"refused\"); the others were",
              {{"results", *results}, {"refused", refused}});
    });
  });
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string id = list[i]["instance_id"], step = list[i]["step"],
                      digest = list[i]["digest"];
    auto one = [results, i, id, step, all](Status s) {
      (*results)[i] = {{"instance_id", id},
                       {"step", step},
                       {"http_status", s.ok() ? 200 : HttpStatusOf(s)},
                       {"detail", s.ok() ? "approved" : s.message()}};
      all->One();
    };
    auto it = now.find({id, step});
    if (it == now.end()) {
      one(FailedPrecondition("step '" + step + "' of " + id + " does not await approval now"));
      continue;
    }
    if (it->second.empty() || it->second != digest) {
      one(FailedPrecondition("the request of step '" + step + "' of " + id +
                             " is not the one seen (its digest is " + it->second +
                             "): look again"));
      continue;
    }
    Status s = engine_.Approve(id, step, who, comment, one);
    if (!s.ok()) one(s);  // refused before any commit
  }
}

void ApiServer::Impl::Bulk(const HttpRequest& req, HttpResponse& res) {
  std::string who = auth_.Authorize(req, res, Role::kOperator);
  if (who.empty()) return;
  const std::string action = req.matches[1];
  nlohmann::json body;
  std::string comment, reason;
  if (!BodyObject(req, res, &body, false) || !OptionalString(req, res, body, "comment", &comment) ||
      !OptionalString(req, res, body, "reason", &reason))
    return;
  Status keys = OnlyKnownKeys(body, {"ids", "filter", "limit", "comment", "reason"}, "the body");
  if (!keys.ok()) return Problem(req, res, 400, keys.message());
  std::vector<std::string> ids;
  if (!Targets(req, res, body, engine_, &ids)) return;
  const std::string text = reason.empty() ? comment : reason;
  // Every instance's actions at once; no thread waits for their commits:
  // the last to end answers, with each result in the order asked.
  auto answer = DeferredAnswer::Start(res, nullptr);
  auto results = std::make_shared<std::vector<nlohmann::json>>(ids.size());
  auto all = Countdown::Start(ids.size(), [answer, results] {
    answer->Give([&](HttpResponse& res) { Json(res, 200, {{"results", *results}}); });
  });
  for (size_t i = 0; i < ids.size(); ++i)
    BulkOne(action, ids[i], who, text, [results, i, id = ids[i], all](Status s, std::string what) {
      (*results)[i] = {
          {"id", id}, {"http_status", HttpStatusOf(s)}, {"detail", s.ok() ? what : s.message()}};
      all->One();
    });
}

}  // namespace sagad

// Bulk actions (http_api_impl.h): POST /v1/instances/actions/{action} with
// {"ids": [...]} or {"filter": {"saga", "status", "waiting"}, "limit": N},
// and "comment" / "reason". Each instance is judged as its single action
// would be and gets its own result; the answer is 200 with every result.
#include <algorithm>

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

}  // namespace

Status ApiServer::Impl::BulkOne(const std::string& action, const std::string& id,
                                const std::string& who, const std::string& text,
                                std::string* done) {
  if (action == "cancel") {
    *done = "cancelled";
    return engine_.Cancel(id, who, text);
  }
  auto view = engine_.GetInstance(id);
  if (!view.ok()) return view.status();
  // approve / reject: every step awaiting approval; retry: every step the
  // saga is at (those waiting on a timer or in review take it).
  std::vector<std::string> steps = action == "retry"
                                       ? view->value("current_steps", std::vector<std::string>{})
                                       : StepsIn(*view, "AWAITING_APPROVAL");
  if (steps.empty())
    return FailedPrecondition(action == "retry" ? "no step of the instance can be retried now"
                                                : "no step of the instance awaits approval");
  Status first_error;
  int acted = 0;
  for (const auto& step : steps) {
    Status s = action == "approve"  ? engine_.Approve(id, step, who, text)
               : action == "reject" ? engine_.Reject(id, step, who, text)
                                    : engine_.RetryNow(id, step, who, text);
    if (s.ok())
      ++acted;
    else if (first_error.ok())
      first_error = s;
  }
  if (acted == 0) return first_error;
  *done = action + ": " + std::to_string(acted) + " step(s)";
  return Status::Ok();
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
  nlohmann::json results = nlohmann::json::array();
  for (const auto& id : ids) {
    std::string done;
    Status s = BulkOne(action, id, who, text, &done);
    results.push_back(
        {{"id", id}, {"http_status", HttpStatusOf(s)}, {"detail", s.ok() ? done : s.message()}});
  }
  Json(res, 200, {{"results", results}});
}

}  // namespace sagad

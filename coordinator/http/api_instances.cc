// The API's handlers of instances: submit, list, read, wait, act
// (http_api_impl.h).
#include "adapters/sha256.h"
#include "adapters/trace_context.h"
#include "coordinator/http/api_exchange.h"
#include "coordinator/http/http_api_impl.h"
#include "sagas/settled.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

// ?limit=N, 1..500 (50 when absent); false with a 400.
bool LimitParam(const HttpRequest& req, HttpResponse& res, size_t* limit) {
  *limit = 50;
  if (!req.has_param("limit")) return true;
  std::string v = req.get_param_value("limit");
  char* end = nullptr;
  long l = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || l < 1 || l > 500) {
    Problem(req, res, 400, "limit must be an integer from 1 to 500");
    return false;
  }
  *limit = static_cast<size_t>(l);
  return true;
}

// ?input.FIELD=VALUE or (a run's) ?metadata.FIELD=VALUE (one field); false
// with a 400.
bool InputFilter(const HttpRequest& req, HttpResponse& res, InstanceFilter* filter) {
  for (const auto& [k, v] : req.params) {
    const bool metadata = k.rfind("metadata.", 0) == 0;
    if (k.rfind("input.", 0) != 0 && !metadata) continue;
    if (!filter->input_field.empty()) {
      Problem(req, res, 400,
              "search by one input field at a time (input.FIELD=VALUE), or one field of "
              "a run's metadata (metadata.FIELD=VALUE)");
      return false;
    }
    filter->in_metadata = metadata;
    filter->input_field = k.substr(metadata ? 9 : 6);
    filter->input_value = v;
    if (filter->input_field.empty() || filter->input_field.find('.') != std::string::npos) {
      Problem(req, res, 400,
              "'" + k +
                  "': search by a top-level input field (input.FIELD=VALUE); a path into "
                  "the input is not supported");
      return false;
    }
  }
  return true;
}

// ?created_after=MS / ?created_before=MS: a wall time in ms since the epoch
// (as an instance's created_at); false with a 400.
bool CreatedBound(const HttpRequest& req, HttpResponse& res, const char* name, int64_t* out) {
  if (!req.has_param(name)) return true;
  const std::string v = req.get_param_value(name);
  if (v.empty() || v.size() > 15 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(v) <= 0) {
    Problem(req, res, 400,
            std::string(name) + " must be a time in milliseconds since 1970 (as created_at)");
    return false;
  }
  *out = std::stoll(v);
  return true;
}

// The filters of a list: status, saga, waiting, the submission's
// Idempotency-Key, an input field, and the cursor; false with a 400.
bool ListFilters(const HttpRequest& req, HttpResponse& res, InstanceFilter* filter,
                 std::string* cursor) {
  filter->status = req.get_param_value("status");
  if (!filter->status.empty() && !IsSagaStatus(filter->status)) {
    Problem(req, res, 400, "unknown status '" + filter->status + "'");
    return false;
  }
  filter->saga = req.get_param_value("saga");
  filter->waiting = req.get_param_value("waiting");
  const std::string& waiting = filter->waiting;
  if (!waiting.empty() && !IsWaitingFor(waiting)) {
    Problem(req, res, 400, "waiting must be retry, approval or review");
    return false;
  }
  filter->idempotency_key = req.get_param_value("idempotency_key");
  if (req.has_param("idempotency_key") && filter->idempotency_key.empty()) {
    Problem(req, res, 400, "idempotency_key is empty: give the key to look for, or leave it out");
    return false;
  }
  if (!InputFilter(req, res, filter)) return false;
  if (!CreatedBound(req, res, "created_after", &filter->created_after) ||
      !CreatedBound(req, res, "created_before", &filter->created_before))
    return false;
  *cursor = req.get_param_value("cursor");
  if (!ValidCursor(*cursor)) {
    Problem(req, res, 400, "cursor must be a next_cursor value from an earlier page");
    return false;
  }
  return true;
}

}  // namespace

void ApiServer::Impl::Submit(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kSubmitter);
  if (caller.name.empty()) return;
  std::string saga = req.matches[1];
  double wait;
  if (!WaitParam(req, res, &wait)) return;
  nlohmann::json body;
  if (!BodyObject(req, res, &body, false)) return;
  if (!body.contains("input") || !body["input"].is_object())
    return Problem(req, res, 400, "body must be {\"input\": {...}} with an object as input");
  std::string key = req.get_header_value("Idempotency-Key");
  if (key.size() > 255)
    return Problem(req, res, 400, "Idempotency-Key is longer than 255 characters");
  key = ScopedKey(caller, key);  // each principal its own key space
  const std::string hash = RequestHash(KeyedRequest::kSubmission, saga, body);
  int version = 0;
  if (!SubmittedVersion(req, res, body, &version)) return;
  if (!InputMatches(req, res, saga, version, body["input"])) return;
  // No thread waits for the creation's commit: the answer is given from
  // its continuation.
  auto pending = DeferSubmission(res, key);
  engine_.SubmitAsync(
      saga, version, body["input"], key, hash,
      TraceFromHeaders(req.get_header_value("traceparent"), req.get_header_value("tracestate")),
      caller.name, [this, &req, key, wait, pending](const StatusOr<SubmitOutcome>& sub) {
        AnswerCreated(req, pending, key, sub, wait);
      });
}

std::shared_ptr<PendingSubmission> ApiServer::Impl::DeferSubmission(HttpResponse& res,
                                                                    const std::string& key) {
  return PendingSubmission::Start(res, [this, key] {
    engine_.FinishSubmission(key, 0, nullptr);  // never answered
  });
}

void ApiServer::Impl::AnswerCreated(const HttpRequest& req,
                                    const std::shared_ptr<PendingSubmission>& pending,
                                    const std::string& key, const StatusOr<SubmitOutcome>& sub,
                                    double wait) {
  if (!sub.ok()) {
    pending->answer()->Give([&](HttpResponse& res) { ProblemFromStatus(req, res, sub.status()); });
    return;
  }
  if (sub->replayed && sub->stored_status != 0) {
    pending->answer()->Give([&](HttpResponse& res) {
      res.set_header("Location", "/v1/instances/" + sub->instance_id);
      res.set_header("Idempotent-Replayed", "true");
      Json(res, sub->stored_status, sub->stored_response);
    });
    return;
  }
  // A replay whose first request never got its answer (sagad died before
  // replying) is answered as the first would have been, waiting if asked.
  AnswerSubmission(req, pending, key, sub->instance_id, sub->replayed, wait);
}

bool ApiServer::Impl::SubmittedVersion(const HttpRequest& req, HttpResponse& res,
                                       const nlohmann::json& body, int* version) {
  *version = 0;
  if (!req.has_param("version") && !body.contains("version")) return true;
  std::string v = req.has_param("version")               ? req.get_param_value("version")
                  : body["version"].is_number_unsigned() ? body["version"].dump()
                                                         : std::string("x");
  if (ParseVersion(v, version)) return true;
  Problem(req, res, 400, "version must be an integer from 1 to 2147483647");
  return false;
}

bool ApiServer::Impl::InputMatches(const HttpRequest& req, HttpResponse& res,
                                   const std::string& saga, int version,
                                   const nlohmann::json& input) {
  SagaDefinitionPtr def = engine_.Definition(saga, version);
  if (!def) return true;  // the engine answers for an unknown saga
  std::vector<SchemaError> errors = def->InputErrors(input);
  if (errors.empty()) return true;
  // 422 for an input_schema; a saga with only required fields answers 400,
  // as it always did.
  SchemaProblem(req, res, def->input_schema.is_null() ? 400 : 422,
                "input does not match saga '" + saga + "'", "input", errors);
  return false;
}

void ApiServer::Impl::AnswerSubmission(const HttpRequest& req,
                                       const std::shared_ptr<PendingSubmission>& pending,
                                       const std::string& key, const std::string& id, bool replayed,
                                       double wait) {
  // The key must never stay "in progress": every path out finishes it. The
  // answer goes out once the response it gives is stored (a replay right
  // after it gets the same answer), from the store's continuation: no
  // thread waits for that commit, and none for the wait. A client gone
  // before the answer: the instance runs on; a replay of the key gets what
  // this request would have.
  // The wait holds `pending`: while it lasts, a client that goes away
  // reaches it (the connection holds it only weakly).
  auto headers = [id, replayed](HttpResponse& res) {
    res.set_header("Location", "/v1/instances/" + id);
    if (replayed) res.set_header("Idempotent-Replayed", "true");
  };
  auto give = [this, &req, key, wait, pending, headers](const StatusOr<nlohmann::json>& j) {
    const std::shared_ptr<DeferredAnswer>& answer = pending->answer();
    try {
      if (!j.ok()) {
        engine_.FinishSubmission(key, 0, nullptr);
        answer->Give([&](HttpResponse& res) { ProblemFromStatus(req, res, j.status()); });
        return;
      }
      int status = (wait > 0 && SagaSettledName(j->value("status", ""))) ? 200 : 201;
      auto body = std::make_shared<const nlohmann::json>(*j);
      engine_.FinishSubmission(key, status, *body, [answer, status, body, headers] {
        answer->Give([&](HttpResponse& res) {
          headers(res);
          Json(res, status, *body);
        });
      });
    } catch (const std::exception& e) {
      engine_.FinishSubmission(key, 0, nullptr);
      answer->Give([&](HttpResponse& res) { ProblemFromStatus(req, res, Internal(e.what())); });
    }
  };
  if (wait <= 0) return give(engine_.GetInstance(id));
  pending->Waiting(
      engine_.WaitSettledAsync(id, std::chrono::milliseconds(int64_t(wait * 1000)), give));
}

std::shared_ptr<PendingSubmission> PendingSubmission::Start(HttpResponse& res,
                                                            std::function<void()> never_answered) {
  auto p = std::make_shared<PendingSubmission>();
  p->never_answered_ = std::move(never_answered);
  p->answer_ = DeferredAnswer::Start(res, [weak = std::weak_ptr<PendingSubmission>(p)] {
    if (auto p = weak.lock()) p->Abandoned();
  });
  return p;
}

void PendingSubmission::Waiting(std::function<bool()> cancel) {
  {
    MutexLock l(mu_);
    if (!gone_) {
      cancel_ = std::move(cancel);
      return;
    }
  }
  if (cancel()) never_answered_();  // the client left before the wait began
}

void PendingSubmission::Abandoned() {
  std::function<bool()> cancel;
  {
    MutexLock l(mu_);
    gone_ = true;
    cancel = std::move(cancel_);
  }
  if (cancel && cancel()) never_answered_();
}

void ApiServer::Impl::List(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kViewer);
  if (caller.name.empty()) return;
  InstanceFilter filter;
  std::string cursor;
  size_t limit;
  if (!ListFilters(req, res, &filter, &cursor) || !LimitParam(req, res, &limit)) return;
  // A submitter lists its own instances only; others may name an owner.
  filter.owner = req.get_param_value("owner");
  if (!caller.SeesAll()) {
    if (!filter.owner.empty() && filter.owner != caller.name)
      return Json(res, 200, {{"instances", nlohmann::json::array()}, {"next_cursor", nullptr}});
    filter.owner = caller.name;
  }
  // A key is looked up in its principal's key space: the owner named, or
  // the caller's own (a submitter); for an operator or a viewer who names
  // no owner, in every principal's.
  if (!filter.idempotency_key.empty() && filter.owner.empty()) {
    nlohmann::json found = nlohmann::json::array();
    for (const std::string& name : auth_.Principals()) {
      InstanceFilter f = filter;
      Caller space;
      space.name = name;
      f.idempotency_key = ScopedKey(space, filter.idempotency_key);
      auto page = engine_.List(f, 1, "");
      if (!page.ok()) return ProblemFromStatus(req, res, page.status());
      for (auto& i : page->instances) found.push_back(std::move(i));
    }
    return Json(res, 200, {{"instances", found}, {"next_cursor", nullptr}});
  }
  Caller keys = caller;
  if (!filter.owner.empty()) keys.name = filter.owner;
  filter.idempotency_key = ScopedKey(keys, filter.idempotency_key);
  // The page is read by a reader (history_readers.h), never on this thread;
  // `req` is touched only inside Give, which a gone client never reaches.
  auto answer = DeferredAnswer::Start(res, nullptr);
  const bool queued = readers_.Post([this, answer, &req, filter, limit, cursor] {
    StatusOr<InstancePage> page = Internal("the list was not read");
    try {
      page = engine_.List(filter, limit, cursor);
    } catch (const std::exception& e) {
      page = Internal(e.what());
    }
    answer->Give([&](HttpResponse& res) {
      if (!page.ok()) return ProblemFromStatus(req, res, page.status());
      nlohmann::json out = {{"instances", page->instances}};
      out["next_cursor"] =
          page->next_cursor.empty() ? nlohmann::json() : nlohmann::json(page->next_cursor);
      out["indexed"] = page->indexed;
      Json(res, 200, out);
    });
  });
  if (!queued)
    answer->Give([&](HttpResponse& res) {
      res.set_header("Retry-After", "1");
      Problem(req, res, 503,
              std::to_string(kMaxQueuedHistoryReads) +
                  " reads of the history are queued already; ask again in a moment");
    });
}

void ApiServer::Impl::Get(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kViewer);
  if (caller.name.empty()) return;
  double wait;
  bool decided;
  if (!WaitParam(req, res, &wait) || !UntilParam(req, res, &decided)) return;
  std::string id = req.matches[1];
  if (wait > 0) {  // a long poll: no thread waits for it
    if (Status may = MayRead(caller, id); !may.ok()) return ProblemFromStatus(req, res, may);
    auto drop = std::make_shared<std::function<bool()>>([] { return false; });
    auto answer = DeferredAnswer::Start(res, [drop] { (*drop)(); });
    *drop = engine_.WaitSettledAsync(
        id, std::chrono::milliseconds(int64_t(wait * 1000)),
        [&req, answer](StatusOr<nlohmann::json> j) {
          answer->Give([&](HttpResponse& res) {
            if (!j.ok())
              ProblemFromStatus(req, res, j.status());
            else
              Json(res, 200, *j);
          });
        },
        decided ? Engine::Decided() : nullptr);
    return;
  }
  auto seen = VisibleInstance(caller, id);
  if (!seen.ok()) return ProblemFromStatus(req, res, seen.status());
  Json(res, 200, *seen);
}

void ApiServer::Impl::Events(const HttpRequest& req, HttpResponse& res) {
  const Caller caller = auth_.Identify(req, res, Role::kViewer);
  if (caller.name.empty()) return;
  if (Status may = MayRead(caller, req.matches[1]); !may.ok())
    return ProblemFromStatus(req, res, may);
  auto evs = engine_.GetEvents(req.matches[1]);
  if (!evs.ok()) return ProblemFromStatus(req, res, evs.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : *evs) out.push_back(e.ViewJson());
  Json(res, 200, {{"instance_id", std::string(req.matches[1])}, {"events", out}});
}

void ApiServer::Impl::StepAction(const HttpRequest& req, HttpResponse& res) {
  std::string who = auth_.Authorize(req, res, Role::kOperator);
  if (who.empty()) return;
  std::string id = req.matches[1], step = req.matches[2], action = req.matches[3];
  nlohmann::json body;
  if (!BodyObject(req, res, &body, action != "resolve" && action != "skip")) return;
  std::string comment, reason, outcome, ref;
  if (!OptionalString(req, res, body, "comment", &comment) ||
      !OptionalString(req, res, body, "reason", &reason) ||
      !OptionalString(req, res, body, "outcome", &outcome) ||
      !OptionalString(req, res, body, "external_ref", &ref))
    return;
  auto result = body.find("result");
  if (action == "skip" && (result == body.end() || !result->is_object()))
    return Problem(req, res, 400, "'result' (a JSON object) is required to skip a step");
  if (action == "resolve" && outcome.empty())
    return Problem(req, res, 400, "'outcome' is required: \"committed\" or \"not_executed\"");
  Engine::ActionDone done = DeferAction(req, res, id);
  Status s;
  if (action == "approve") {
    s = engine_.Approve(id, step, who, comment, done);
  } else if (action == "reject") {
    s = engine_.Reject(id, step, who, reason.empty() ? comment : reason, done);
  } else if (action == "retry") {
    s = engine_.RetryNow(id, step, who, comment, done);
  } else if (action == "skip") {
    s = engine_.Skip(id, step, *result, ref, who, comment, done);
  } else {
    s = engine_.Resolve(id, step, outcome, ref, who, comment, done);
  }
  if (!s.ok()) done(s);  // refused before any commit
}

bool ApiServer::Impl::OperatorWithReason(const HttpRequest& req, HttpResponse& res,
                                         std::string* who, std::string* reason) {
  *who = auth_.Authorize(req, res, Role::kOperator);
  if (who->empty()) return false;
  nlohmann::json body;
  if (!BodyObject(req, res, &body, true)) return false;
  if (Status keys = OnlyKnownKeys(body, {"reason"}, "the body"); !keys.ok()) {
    Problem(req, res, 400, keys.message());
    return false;
  }
  return OptionalString(req, res, body, "reason", reason);
}

void ApiServer::Impl::CancelOrCompensate(const HttpRequest& req, HttpResponse& res) {
  if (req.matches[1] == "actions")  // not an instance: a bulk action that does not exist
    return Problem(req, res, 404,
                   "there is no bulk action '" + req.matches[2] +
                       "' (bulk actions: retry, cancel, approve, reject); to compensate one "
                       "instance: POST /v1/instances/{id}/compensate");
  std::string who, reason;
  if (!OperatorWithReason(req, res, &who, &reason)) return;
  std::string id = req.matches[1];
  Engine::ActionDone done = DeferAction(req, res, id);
  Status s = std::string(req.matches[2]) == "cancel"
                 ? engine_.Cancel(id, who, reason, done)
                 : engine_.ForceCompensate(id, who, reason, done);
  if (!s.ok()) done(s);  // refused before any commit
}

Engine::ActionDone ApiServer::Impl::DeferAction(const HttpRequest& req, HttpResponse& res,
                                                const std::string& id) {
  // No thread waits for the action's commit: its continuation answers,
  // with the instance as it is then (read before the answer is taken).
  auto answer = DeferredAnswer::Start(res, nullptr);
  return [this, &req, id, answer](Status s) {
    StatusOr<nlohmann::json> view = s.ok() ? engine_.GetInstance(id) : StatusOr<nlohmann::json>(s);
    answer->Give([&](HttpResponse& res) {
      if (!view.ok()) return ProblemFromStatus(req, res, view.status());
      Json(res, 200, *view);
    });
  };
}

}  // namespace sagad

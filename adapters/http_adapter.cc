#include "adapters/http_adapter.h"

#include <future>

#include "adapters/classify.h"
#include "adapters/http_client.h"
#include "adapters/sha256.h"
#include "sagas/template.h"
#include "util/check.h"
#include "util/json_limits.h"
#include "util/thread_role.h"

namespace sagad {
namespace {

// A reply body as a result: its JSON, else {"raw": the first 4 KiB as text}.
// Bytes that are not UTF-8 are kept as \xHH (the JSON parser refuses them).
nlohmann::json ParseBody(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  if (!JsonDepthWithin(body)) return {{"raw", SanitizeUtf8(body.substr(0, 4096))}};
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return {{"raw", SanitizeUtf8(body.substr(0, 4096))}};
  if (!FindNul(j).empty()) return EscapeNul(j);  // kept, escaped: never refused
  return j;
}

// traceparent with a span of its own for this request, and tracestate.
void AddTraceHeaders(const TraceContext& trace, HttpExchangeRequest* x) {
  if (trace.trace_id.empty()) return;
  x->headers.emplace_back("traceparent", OutgoingTraceparent(trace));
  if (!trace.tracestate.empty()) x->headers.emplace_back("tracestate", trace.tracestate);
}

CallResult ToCallResult(HttpExchangeResult r) {
  CallResult out;
  if (!r.replied) {
    out.outcome = r.too_large ? Outcome::kUnknown : ClassifyTransportError(r.sent);
    out.withheld = r.withheld;
    out.error = std::move(r.error);
    return out;
  }
  out.http_status = r.status;
  out.outcome = ClassifyHttpStatus(r.status);
  out.replayed = r.replayed;
  if (out.outcome == Outcome::kCommitted) {
    out.result = ParseBody(r.body);
    out.external_ref = ExternalRef(out.result);
  } else {
    out.error = ReplyError(r.status, r.body);
  }
  return out;
}

QueryResult ToQueryResult(HttpExchangeResult r) {
  if (!r.replied) {
    QueryResult out;
    out.error =
        (r.too_large ? "reconciliation query: " : "reconciliation query failed: ") + r.error;
    return out;
  }
  if (r.status == 200 && !r.body.empty() &&
      (!JsonDepthWithin(r.body) ||
       nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false).is_discarded())) {
    // Not an answer sagad can read: it says nothing about what happened.
    QueryResult out;
    out.error = "reconciliation query: HTTP 200 whose body is not JSON; still unclear";
    return out;
  }
  return ClassifyQueryAnswer(r.status, r.status == 200 ? ParseBody(r.body) : nlohmann::json());
}

}  // namespace

HttpAdapter::HttpAdapter(std::map<std::string, ServiceConfig> services, int threads)
    : services_(std::move(services)), client_(std::make_unique<AsyncHttpClient>(threads)) {
  for (const auto& [name, cfg] : services_) client_->AddService(cfg);
}

HttpAdapter::~HttpAdapter() = default;

const ServiceConfig* HttpAdapter::Service(const std::string& name) const {
  auto it = services_.find(name);
  return it == services_.end() ? nullptr : &it->second;
}

std::vector<std::string> HttpAdapter::ServiceNames() const {
  std::vector<std::string> out;
  for (const auto& [name, svc] : services_) out.push_back(name);
  return out;
}

void HttpAdapter::CallAsync(const CallRequest& req, CallDone done) {
  const ServiceConfig* cfg = Service(req.service);
  if (!cfg) {
    CallResult out;
    out.outcome = Outcome::kNotExecuted;
    out.error = "service '" + req.service + "' is not configured";
    return done(std::move(out));
  }
  HttpExchangeRequest x;
  x.service = req.service;
  x.method = req.method;
  x.target = client_->Prefix(req.service) + req.path;
  for (const auto& [k, v] : cfg->headers) x.headers.emplace_back(k, v);
  if (!req.idempotency_key.empty())  // a reconcile read carries none
    x.headers.emplace_back("Idempotency-Key", req.idempotency_key);
  x.headers.emplace_back("Saga-Instance", req.instance_id);
  x.headers.emplace_back("Saga-Step", req.step);
  x.headers.emplace_back("Saga-Fencing-Token", std::to_string(req.fencing_token));
  x.headers.emplace_back("Saga-Attempt", std::to_string(req.attempt));
  AddTraceHeaders(req.trace, &x);
  x.may_write = req.may_write;
  if (!req.body.is_null()) {
    x.body = CanonicalJson(req.body);
    x.headers.emplace_back("Content-Type", "application/json");
  }
  client_->Send(std::move(x), [done = std::move(done)](HttpExchangeResult r) {
    done(ToCallResult(std::move(r)));
  });
}

void HttpAdapter::QueryAsync(const std::string& service, const std::string& key,
                             const std::string& instance_id, uint64_t fencing_token, int attempt,
                             const TraceContext& trace, QueryDone done) {
  const ServiceConfig* cfg = Service(service);
  if (!cfg) {
    QueryResult out;
    out.error = "service '" + service + "' is not configured";
    return done(std::move(out));
  }
  std::string path = cfg->operations_path;
  size_t pos = path.find("{key}");
  if (pos != std::string::npos) path.replace(pos, 5, PercentEncode(key));
  HttpExchangeRequest x;
  x.service = service;
  x.method = "GET";
  x.target = client_->Prefix(service) + path;
  for (const auto& [k, v] : cfg->headers) x.headers.emplace_back(k, v);
  x.headers.emplace_back("Saga-Instance", instance_id);
  x.headers.emplace_back("Saga-Fencing-Token", std::to_string(fencing_token));
  x.headers.emplace_back("Saga-Attempt", std::to_string(attempt));
  AddTraceHeaders(trace, &x);
  client_->Send(std::move(x), [done = std::move(done)](HttpExchangeResult r) {
    done(ToQueryResult(std::move(r)));
  });
}

CallResult AwaitCall(Adapter& adapter, const CallRequest& req) {
  SAGAD_CHECK(!AsyncHttpClient::OnLoopThread()) << "a blocking call on an event-loop thread";
  CheckMayBlock("a blocking downstream call");
  std::promise<CallResult> p;
  auto f = p.get_future();
  adapter.CallAsync(req, [&p](CallResult r) { p.set_value(std::move(r)); });
  return f.get();
}

QueryResult AwaitQuery(Adapter& adapter, const std::string& service, const std::string& key,
                       const std::string& instance_id, uint64_t fencing_token, int attempt,
                       const TraceContext& trace) {
  SAGAD_CHECK(!AsyncHttpClient::OnLoopThread()) << "a blocking query on an event-loop thread";
  CheckMayBlock("a blocking downstream query");
  std::promise<QueryResult> p;
  auto f = p.get_future();
  adapter.QueryAsync(service, key, instance_id, fencing_token, attempt, trace,
                     [&p](QueryResult r) { p.set_value(std::move(r)); });
  return f.get();
}

CallResult HttpAdapter::Call(const CallRequest& req) { return AwaitCall(*this, req); }

QueryResult HttpAdapter::Query(const std::string& service, const std::string& key,
                               const std::string& instance_id, uint64_t fencing_token, int attempt,
                               const TraceContext& trace) {
  return AwaitQuery(*this, service, key, instance_id, fencing_token, attempt, trace);
}

}  // namespace sagad

#include "adapters/http_adapter.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "adapters/classify.h"
#include "adapters/deadline_watch.h"
#include "adapters/sha256.h"
#include "adapters/tls_probe.h"
#include "sagas/template.h"
#include "util/json_limits.h"
#include "util/mutex.h"

namespace sagad {
namespace {

// Splits "http://host:port/prefix" into ("http://host:port", "/prefix").
void SplitBaseUrl(const std::string& url, std::string* origin, std::string* prefix) {
  size_t scheme = url.find("://");
  size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (path == std::string::npos) {
    *origin = url;
    prefix->clear();
  } else {
    *origin = url.substr(0, path);
    *prefix = url.substr(path);
    while (!prefix->empty() && prefix->back() == '/') prefix->pop_back();
  }
}

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

// Sends hreq, reading at most max_bytes of the reply body (more is never
// buffered: the read is cancelled). *too_large says it was.
httplib::Result SendCapped(httplib::Client& client, httplib::Request& hreq, size_t max_bytes,
                           bool* too_large) {
  auto body = std::make_shared<std::string>();
  *too_large = false;
  hreq.content_receiver = [body, max_bytes, too_large](const char* data, size_t n, uint64_t,
                                                       uint64_t) {
    if (body->size() + n > max_bytes) {
      *too_large = true;
      return false;
    }
    body->append(data, n);
    return true;
  };
  httplib::Result res = client.send(hreq);
  if (res) res->body = std::move(*body);
  return res;
}

// SendCapped within the service's timeout_ms for the whole attempt: the
// watch stops the client when it runs past it (*expired).
httplib::Result SendWithin(DeadlineWatch& watch, httplib::Client& client, httplib::Request& hreq,
                           const ServiceConfig& config, bool* too_large, bool* expired) {
  const uint64_t handle =
      watch.Arm(std::chrono::steady_clock::now() + std::chrono::milliseconds(config.timeout_ms),
                [&client] { client.stop(); });
  httplib::Result res = SendCapped(client, hreq, config.max_response_bytes, too_large);
  *expired = watch.Disarm(handle);
  return res;
}

// traceparent with a span of its own for this request, and tracestate.
void AddTraceHeaders(const TraceContext& trace, httplib::Request* hreq) {
  if (trace.trace_id.empty()) return;
  hreq->headers.emplace("traceparent", OutgoingTraceparent(trace));
  if (!trace.tracestate.empty()) hreq->headers.emplace("tracestate", trace.tracestate);
}

std::string TooLarge(size_t max_bytes) {
  return "reply larger than " + std::to_string(max_bytes) +
         " bytes (max_response_bytes): not read, outcome unknown";
}

// What a failed exchange means: `sent` false when the request cannot have
// been acted on; the words say what happened and where.
std::string TransportError(httplib::Error err, int alert, const ServiceConfig& cfg,
                           const std::string& origin, bool* sent) {
  *sent = false;
  switch (err) {
    case httplib::Error::Connection:
      return "not sent: cannot connect to " + origin + " (connection refused or unreachable)";
    case httplib::Error::ConnectionTimeout:
      return "not sent: connecting to " + origin + " timed out after " +
             std::to_string(cfg.timeout_ms) + " ms";
    case httplib::Error::BindIPAddress:
      return "not sent: cannot bind a local address to reach " + origin;
    case httplib::Error::SSLConnection:
      return "not sent: the TLS handshake with " + origin + " failed";
    case httplib::Error::SSLLoadingCerts:
      return "not sent: cannot load the TLS files (ca_file, client_cert_file, client_key_file)";
    case httplib::Error::SSLServerVerification:
      return "not sent: the certificate of " + origin + " could not be verified (ca_file?)";
    default:
      break;
  }
  if (RefusesTheHandshake(alert))
    return "not sent: " + origin + " refused the TLS handshake (alert " + std::to_string(alert) +
           ": " + SSL_alert_desc_string_long(alert) + "; is the client certificate right?)";
  *sent = true;
  if (err == httplib::Error::Read)
    return "no response: the connection to " + origin +
           " was closed or reset, or no answer came "
           "within timeout_ms (" +
           std::to_string(cfg.timeout_ms) + " ms)";
  if (err == httplib::Error::Write)
    return "no response: writing the request to " + origin + " failed partway";
  return "no response: " + httplib::to_string(err) + " (" + origin + ")";
}

}  // namespace

// Idle keep-alive clients of one service; a client serves one call at a time.
struct HttpAdapter::Pool {
  ServiceConfig config;
  std::string origin;
  std::string prefix;
  Mutex mu;
  std::vector<std::unique_ptr<httplib::Client>> idle GUARDED_BY(mu);

  std::unique_ptr<httplib::Client> Acquire() {
    {
      MutexLock l(mu);
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    auto c = config.client_cert_file.empty()
                 ? std::make_unique<httplib::Client>(origin)
                 : std::make_unique<httplib::Client>(origin, config.client_cert_file,
                                                     config.client_key_file);
    if (!config.ca_file.empty()) c->set_ca_cert_path(config.ca_file);
    c->enable_server_certificate_verification(config.tls_verify);
    c->set_keep_alive(true);
    c->set_tcp_nodelay(true);  // headers and body go out as separate writes
    time_t sec = config.timeout_ms / 1000;
    time_t usec = (config.timeout_ms % 1000) * 1000;
    c->set_connection_timeout(sec, usec);
    c->set_read_timeout(sec, usec);
    c->set_write_timeout(sec, usec);
    return c;
  }
  void Release(std::unique_ptr<httplib::Client> c) {
    MutexLock l(mu);
    if (idle.size() < 64) idle.push_back(std::move(c));
  }
};

HttpAdapter::HttpAdapter(std::map<std::string, ServiceConfig> services)
    : services_(std::move(services)), watch_(std::make_unique<DeadlineWatch>()) {
  for (auto& [name, cfg] : services_) {
    auto pool = std::make_unique<Pool>();
    pool->config = cfg;
    SplitBaseUrl(cfg.base_url, &pool->origin, &pool->prefix);
    pools_[name] = std::move(pool);
  }
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

CallResult HttpAdapter::Call(const CallRequest& req) {
  CallResult out;
  auto it = pools_.find(req.service);
  if (it == pools_.end()) {
    out.outcome = Outcome::kNotExecuted;
    out.error = "service '" + req.service + "' is not configured";
    return out;
  }
  Pool& pool = *it->second;
  httplib::Request hreq;
  hreq.method = req.method;
  hreq.path = pool.prefix + req.path;
  for (const auto& [k, v] : pool.config.headers) hreq.headers.emplace(k, v);
  hreq.headers.emplace("Idempotency-Key", req.idempotency_key);
  hreq.headers.emplace("Saga-Instance", req.instance_id);
  hreq.headers.emplace("Saga-Step", req.step);
  hreq.headers.emplace("Saga-Fencing-Token", std::to_string(req.fencing_token));
  hreq.headers.emplace("Saga-Attempt", std::to_string(req.attempt));
  AddTraceHeaders(req.trace, &hreq);
  if (!req.body.is_null()) {
    hreq.body = CanonicalJson(req.body);
    hreq.headers.emplace("Content-Type", "application/json");
  }
  auto client = pool.Acquire();
  bool too_large = false;
  const bool fresh = client->is_socket_open() == 0;  // this call makes its connection
  ERR_clear_error();                                 // what is queued after the call is this call's
  bool expired = false;
  httplib::Result res = SendWithin(*watch_, *client, hreq, pool.config, &too_large, &expired);
  int alert = res ? 0 : TakeTlsAlert();
  // A fresh TLS 1.3 connection may be reset before the server's alert is
  // read: ask the server's handshake again, sending nothing (tls_probe.h).
  if (!res && fresh && !RefusesTheHandshake(alert) && pool.origin.rfind("https://", 0) == 0 &&
      (res.error() == httplib::Error::Read || res.error() == httplib::Error::Write))
    alert = TlsHandshakeAlert(pool.config, pool.origin, std::min(pool.config.timeout_ms, 2000));
  if (too_large) {
    out.outcome = Outcome::kUnknown;
    out.error = TooLarge(pool.config.max_response_bytes);
    return out;
  }
  if (!res) {
    // Nothing left before the connection (and its TLS handshake) stood.
    bool sent = true;
    out.error = TransportError(res.error(), alert, pool.config, pool.origin, &sent);
    if (expired && sent)
      out.error = "no complete reply from " + pool.origin + " within timeout_ms (" +
                  std::to_string(pool.config.timeout_ms) +
                  " ms, the whole attempt): outcome unknown";
    out.outcome = ClassifyTransportError(sent);
    return out;  // a failed client is dropped, not pooled
  }
  out.http_status = res->status;
  out.outcome = ClassifyHttpStatus(res->status);
  out.replayed = res->get_header_value("Idempotent-Replayed") == "true";
  if (out.outcome == Outcome::kCommitted) {
    out.result = ParseBody(res->body);
    out.external_ref = ExternalRef(out.result);
  } else {
    out.error = ReplyError(res->status, res->body);
  }
  pool.Release(std::move(client));
  return out;
}

QueryResult HttpAdapter::Query(const std::string& service, const std::string& key,
                               const std::string& instance_id, uint64_t fencing_token, int attempt,
                               const TraceContext& trace) {
  QueryResult out;
  auto it = pools_.find(service);
  if (it == pools_.end()) {
    out.error = "service '" + service + "' is not configured";
    return out;
  }
  Pool& pool = *it->second;
  std::string path = pool.config.operations_path;
  size_t pos = path.find("{key}");
  if (pos != std::string::npos) path.replace(pos, 5, PercentEncode(key));
  httplib::Request hreq;
  hreq.method = "GET";
  hreq.path = pool.prefix + path;
  for (const auto& [k, v] : pool.config.headers) hreq.headers.emplace(k, v);
  hreq.headers.emplace("Saga-Instance", instance_id);
  hreq.headers.emplace("Saga-Fencing-Token", std::to_string(fencing_token));
  hreq.headers.emplace("Saga-Attempt", std::to_string(attempt));
  AddTraceHeaders(trace, &hreq);
  auto client = pool.Acquire();
  bool too_large = false, expired = false;
  httplib::Result res = SendWithin(*watch_, *client, hreq, pool.config, &too_large, &expired);
  if (too_large) {
    out.error = "reconciliation query: " + TooLarge(pool.config.max_response_bytes);
    return out;
  }
  if (!res) {
    out.error = std::string("reconciliation query failed: ") + httplib::to_string(res.error());
    return out;
  }
  out = ClassifyQueryAnswer(res->status,
                            res->status == 200 ? ParseBody(res->body) : nlohmann::json());
  pool.Release(std::move(client));
  return out;
}

}  // namespace sagad

#include "adapters/http_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <map>
#include <optional>
#include <thread>

#include "adapters/tls_probe.h"
#include "util/mutex.h"

namespace sagad {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr size_t kMaxIdle = 64;
constexpr uint32_t kHeaderLimit = 64 * 1024;

// A connection to a service: plain TCP or TLS over TCP.
struct Conn {
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& Tcp() { return plain ? *plain : beast::get_lowest_layer(*tls); }
  template <typename F>
  void With(F&& f) {
    if (plain)
      f(*plain);
    else
      f(*tls);
  }
  // An idle connection is reusable while the peer has neither closed it nor
  // sent anything unasked (a TLS record may be pending: a session ticket).
  bool Reusable() {
    if (!Tcp().socket().is_open()) return false;
    char c;
    ssize_t n = ::recv(Tcp().socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return static_cast<bool>(tls);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
};

// The alert a TLS error carries (0 if none).
int AlertOf(const beast::error_code& ec) {
  if (ec.category() != asio::error::get_ssl_category()) return 0;
  int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
    return reason - SSL_AD_REASON_OFFSET;
  return 0;
}

bool VerifyFailed(const beast::error_code& ec) {
  return ec.category() == asio::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

std::string Refusal(const std::string& origin, int alert) {
  return "not sent: " + origin + " refused the TLS handshake (alert " + std::to_string(alert) +
         ": " + SSL_alert_desc_string_long(alert) + "; is the client certificate right?)";
}

bool IsIpLiteral(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

struct AsyncHttpClient::Impl {
  struct Service {
    ServiceConfig config;
    bool tls = false;
    std::string host, port, origin, prefix;
    std::unique_ptr<ssl::context> ctx;
    std::string tls_error;                    // the TLS files could not be loaded
    std::vector<std::unique_ptr<Conn>> idle;  // the loop's thread only
  };
  struct Exchange;

  Impl() : work(asio::make_work_guard(io)), thread([this] { io.run(); }) {}
  ~Impl() {
    {
      MutexLock l(aside_mu);
      stopping = true;
      aside_cv.Wait(aside_mu, [this]() REQUIRES(aside_mu) { return aside == 0; });
    }
    work.reset();
    io.stop();
    thread.join();
  }
  // Runs a blocking `fn` (a TLS probe, bounded in time) on a thread of its
  // own, then `then` on the loop; neither if the client is going away.
  void Aside(std::function<int()> fn, std::function<void(int)> then) {
    MutexLock l(aside_mu);
    if (stopping) return;
    ++aside;
    std::thread([this, fn = std::move(fn), then = std::move(then)]() mutable {
      int v = fn();
      asio::post(io, [then = std::move(then), v] { then(v); });
      MutexLock l(aside_mu);
      --aside;
      aside_cv.NotifyAll();
    }).detach();
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::map<std::string, std::unique_ptr<Service>> services;
  Mutex aside_mu;
  bool stopping GUARDED_BY(aside_mu) = false;
  int aside GUARDED_BY(aside_mu) = 0;  // probes running
  CondVar aside_cv;
  std::thread thread;
};

// One attempt, from the first byte to the last (or to its deadline).
struct AsyncHttpClient::Impl::Exchange : std::enable_shared_from_this<Exchange> {
  Exchange(Impl& c, Service& s, HttpExchangeRequest r, Done d)
      : client(c), svc(s), in(std::move(r)), done(std::move(d)), resolver(c.io), deadline(c.io) {}

  void Start() {
    deadline.expires_after(std::chrono::milliseconds(svc.config.timeout_ms));
    deadline.async_wait([self = shared_from_this()](const beast::error_code& ec) {
      if (ec || self->finished) return;
      self->expired = true;
      self->resolver.cancel();
      if (self->conn) self->conn->Tcp().close();
    });
    Build();
    while (!svc.idle.empty()) {
      conn = std::move(svc.idle.back());
      svc.idle.pop_back();
      if (conn->Reusable()) return Write();
      conn.reset();
    }
    if (!svc.tls_error.empty())
      return Fail(false, "not sent: cannot load the TLS files (ca_file, client_cert_file, "
                         "client_key_file): " + svc.tls_error);
    fresh = true;
    conn = std::make_unique<Conn>();
    if (svc.tls)
      conn->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(client.io, *svc.ctx);
    else
      conn->plain = std::make_unique<beast::tcp_stream>(client.io);
    resolver.async_resolve(svc.host, svc.port,
                           [self = shared_from_this()](const beast::error_code& ec,
                                                       tcp::resolver::results_type results) {
                             if (ec) return self->NotConnected();
                             self->Connect(results);
                           });
  }

  void Build() {
    req.method_string(in.method);
    req.target(in.target);
    req.version(11);
    req.set(http::field::host, svc.host + ":" + svc.port);
    req.set(http::field::user_agent, "sagad");
    for (const auto& [k, v] : in.headers) req.set(k, v);
    req.body() = std::move(in.body);
    req.prepare_payload();
  }

  void NotConnected() {
    if (expired)
      return Fail(false, "not sent: connecting to " + svc.origin + " timed out after " +
                             std::to_string(svc.config.timeout_ms) + " ms");
    Fail(false,
         "not sent: cannot connect to " + svc.origin + " (connection refused or unreachable)");
  }

  void Connect(const tcp::resolver::results_type& results) {
    conn->Tcp().async_connect(results, [self = shared_from_this()](
                                           const beast::error_code& ec, const tcp::endpoint&) {
      if (ec) return self->NotConnected();
      self->conn->Tcp().socket().set_option(tcp::no_delay(true));
      if (self->svc.tls) return self->Handshake();
      self->Write();
    });
  }

  void Handshake() {
    SSL* ssl = conn->tls->native_handle();
    if (!IsIpLiteral(svc.host)) SSL_set_tlsext_host_name(ssl, svc.host.c_str());
    if (svc.config.tls_verify) conn->tls->set_verify_callback(ssl::host_name_verification(svc.host));
    conn->tls->async_handshake(
        ssl::stream_base::client, [self = shared_from_this()](const beast::error_code& ec) {
          if (!ec) return self->Write();
          const std::string& origin = self->svc.origin;
          int alert = AlertOf(ec);
          if (RefusesTheHandshake(alert)) return self->Fail(false, Refusal(origin, alert));
          if (VerifyFailed(ec))
            return self->Fail(false, "not sent: the certificate of " + origin +
                                         " could not be verified (ca_file?)");
          if (self->expired) return self->NotConnected();
          self->Fail(false, "not sent: the TLS handshake with " + origin + " failed (" +
                                ec.message() + ")");
        });
  }

  void Write() {
    began = true;
    conn->With([this](auto& stream) {
      http::async_write(stream, req,
                        [self = shared_from_this()](const beast::error_code& ec, size_t) {
                          if (ec) return self->Broken(ec, "writing the request to " +
                                                              self->svc.origin + " failed partway");
                          self->Read();
                        });
    });
  }

  void Read() {
    parser.emplace();
    parser->header_limit(kHeaderLimit);
    parser->body_limit(svc.config.max_response_bytes);
    // The head first: Beast 1.74 loses the body_limit error of a head that
    // arrives with body bytes behind it when it reads both in one go.
    conn->With([this](auto& stream) {
      http::async_read_header(
          stream, conn->buffer, *parser,
          [self = shared_from_this()](const beast::error_code& ec, size_t) {
            if (ec) return self->Broken(ec, "");
            auto length = self->parser->content_length();
            if (length && *length > self->svc.config.max_response_bytes)
              return self->Broken(http::error::body_limit, "");
            self->ReadBody();
          });
    });
  }

  void ReadBody() {
    conn->With([this](auto& stream) {
      http::async_read(stream, conn->buffer, *parser,
                       [self = shared_from_this()](const beast::error_code& ec, size_t) {
                         if (ec) return self->Broken(ec, "");
                         self->Replied();
                       });
    });
  }

  // The request began to leave and the exchange broke: unknown, unless the
  // server refused the TLS handshake of a connection opened here.
  void Broken(const beast::error_code& ec, const std::string& what) {
    if (ec == http::error::body_limit) {
      too_large = true;
      return Fail(true, "reply larger than " + std::to_string(svc.config.max_response_bytes) +
                            " bytes (max_response_bytes): not read, outcome unknown");
    }
    if (expired)
      return Fail(true, "no complete reply from " + svc.origin + " within timeout_ms (" +
                            std::to_string(svc.config.timeout_ms) +
                            " ms, the whole attempt): outcome unknown");
    int alert = AlertOf(ec);
    if (fresh && svc.tls && RefusesTheHandshake(alert)) return Fail(false, Refusal(svc.origin, alert));
    std::string why = !what.empty() ? "no response: " + what
                                    : "no response: the connection to " + svc.origin +
                                          " was closed or reset, or no answer came within "
                                          "timeout_ms (" +
                                          std::to_string(svc.config.timeout_ms) + " ms)";
    if (!(fresh && svc.tls && alert == 0)) return Fail(true, why);
    // A fresh TLS 1.3 connection may be reset before the server's alert is
    // read: ask the server's handshake again, sending nothing (tls_probe.h).
    ServiceConfig cfg = svc.config;
    std::string origin = svc.origin;
    client.Aside(
        [cfg, origin] { return TlsHandshakeAlert(cfg, origin, std::min(cfg.timeout_ms, 2000)); },
        [self = shared_from_this(), why](int probed) {
          if (RefusesTheHandshake(probed)) return self->Fail(false, Refusal(self->svc.origin, probed));
          self->Fail(true, why);
        });
  }

  void Replied() {
    HttpExchangeResult r;
    r.replied = true;
    auto& res = parser->get();
    r.status = static_cast<int>(res.result_int());
    r.replayed = res["Idempotent-Replayed"] == "true";
    bool keep = res.keep_alive();
    r.body = std::move(res.body());
    if (keep && !expired && svc.idle.size() < kMaxIdle) svc.idle.push_back(std::move(conn));
    End(std::move(r));
  }

  void Fail(bool sent, std::string error) {
    HttpExchangeResult r;
    r.sent = sent;
    r.expired = expired;
    r.too_large = too_large;
    r.error = std::move(error);
    conn.reset();  // a broken connection is never pooled
    End(std::move(r));
  }

  void End(HttpExchangeResult r) {
    if (finished) return;
    finished = true;
    deadline.cancel();
    Done d = std::move(done);
    d(std::move(r));
  }

  Impl& client;
  Service& svc;
  HttpExchangeRequest in;
  Done done;
  tcp::resolver resolver;
  asio::steady_timer deadline;
  std::unique_ptr<Conn> conn;
  http::request<http::string_body> req;
  std::optional<http::response_parser<http::string_body>> parser;
  bool fresh = false, began = false, expired = false, too_large = false, finished = false;
};

AsyncHttpClient::AsyncHttpClient() : impl_(std::make_unique<Impl>()) {}
AsyncHttpClient::~AsyncHttpClient() = default;

void AsyncHttpClient::AddService(const ServiceConfig& config) {
  auto s = std::make_unique<Impl::Service>();
  s->config = config;
  const std::string& url = config.base_url;
  size_t scheme = url.find("://");
  s->tls = url.rfind("https://", 0) == 0;
  size_t host_at = scheme == std::string::npos ? 0 : scheme + 3;
  size_t path = url.find('/', host_at);
  std::string authority = url.substr(host_at, path == std::string::npos ? path : path - host_at);
  s->origin = url.substr(0, path);
  if (path != std::string::npos) s->prefix = url.substr(path);
  while (!s->prefix.empty() && s->prefix.back() == '/') s->prefix.pop_back();
  size_t colon = authority.rfind(':');
  bool bracketed = !authority.empty() && authority.front() == '[';
  if (colon != std::string::npos && (!bracketed || authority[colon - 1] == ']')) {
    s->host = authority.substr(0, colon);
    s->port = authority.substr(colon + 1);
  } else {
    s->host = authority;
    s->port = s->tls ? "443" : "80";
  }
  if (bracketed && s->host.size() >= 2) s->host = s->host.substr(1, s->host.size() - 2);
  if (s->tls) {
    s->ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
    try {
      if (config.tls_verify) s->ctx->set_verify_mode(ssl::verify_peer);
      if (!config.ca_file.empty())
        s->ctx->load_verify_file(config.ca_file);
      else
        s->ctx->set_default_verify_paths();
      if (!config.client_cert_file.empty()) {
        s->ctx->use_certificate_chain_file(config.client_cert_file);
        s->ctx->use_private_key_file(config.client_key_file, ssl::context::pem);
      }
    } catch (const std::exception& e) {
      s->tls_error = e.what();
    }
  }
  impl_->services[config.name] = std::move(s);
}

std::string AsyncHttpClient::Origin(const std::string& service) const {
  auto it = impl_->services.find(service);
  return it == impl_->services.end() ? "" : it->second->origin;
}

std::string AsyncHttpClient::Prefix(const std::string& service) const {
  auto it = impl_->services.find(service);
  return it == impl_->services.end() ? "" : it->second->prefix;
}

void AsyncHttpClient::Send(HttpExchangeRequest req, Done done) {
  auto it = impl_->services.find(req.service);
  if (it == impl_->services.end()) {
    HttpExchangeResult r;
    r.sent = false;
    r.error = "service '" + req.service + "' is not configured";
    return done(std::move(r));
  }
  auto x = std::make_shared<Impl::Exchange>(*impl_, *it->second, std::move(req), std::move(done));
  asio::post(impl_->io, [x] { x->Start(); });
}

}  // namespace sagad

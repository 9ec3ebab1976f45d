#include "adapters/http_client.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
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
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "adapters/http_endpoint.h"
#include "adapters/tls_probe.h"
#include "util/mutex.h"
#include "util/thread_role.h"

namespace sagad {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

constexpr uint32_t kHeaderLimit = 64 * 1024;

// A connection to a service: plain TCP or TLS over TCP.
struct Conn {
  asio::io_context* io = nullptr;  // the loop it belongs to
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

bool IsIpLiteral(const std::string& host) {
  beast::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

struct AsyncHttpClient::Impl {
  struct Exchange;
  struct Service {
    ServiceConfig config;
    bool tls = false;
    std::string host, port, origin, prefix;
    std::unique_ptr<ssl::context> ctx;
    std::string tls_error;  // the TLS files could not be loaded
    // The address when the host is an IP literal: connected to without a
    // resolver (Asio's resolver starts a thread of its own on first use).
    std::optional<tcp::endpoint> literal;
    Mutex mu;
    std::vector<std::unique_ptr<Conn>> idle GUARDED_BY(mu);
    int active GUARDED_BY(mu) = 0;  // exchanges that hold a connection
    std::deque<std::shared_ptr<Exchange>> waiting GUARDED_BY(mu);  // for one, in order
  };

  // One event loop per thread: a reply is handled (and `done` runs) on the
  // thread that read it, with no hand-off to another thread.
  explicit Impl(int threads) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      loops.push_back(std::make_unique<Loop>());
      Loop& l = *loops.back();
      l.thread = std::thread([&l] {
        MarkThread(ThreadRole::kHttpLoop);
        NameThread("sagad-calls");
        current_loop = &l.io;
        l.io.run();
      });
    }
  }
  // The loop of a new connection: this thread's if it runs one (a step
  // chained on a reply stays on its loop: no wake-up of another thread),
  // else the next in turn.
  asio::io_context& NextLoop() {
    return current_loop ? *current_loop : loops[next_loop++ % loops.size()]->io;
  }
  static thread_local asio::io_context* current_loop;
  ~Impl() {
    {
      MutexLock l(aside_mu);
      stopping = true;
      aside_cv.Wait(aside_mu, [this]() REQUIRES(aside_mu) { return aside == 0; });
    }
    for (auto& l : loops) {
      l->work.reset();
      l->io.stop();
      l->thread.join();
    }
  }
  // Runs a blocking `fn` (a TLS probe, bounded in time) on a thread of its
  // own, then `then` on the loop; neither if the client is going away.
  void Aside(asio::io_context& io, std::function<int()> fn, std::function<void(int)> then) {
    MutexLock l(aside_mu);
    if (stopping) return;
    ++aside;
    std::thread([this, &io, fn = std::move(fn), then = std::move(then)]() mutable {
      int v = fn();
      asio::post(io, [then = std::move(then), v] { then(v); });
      MutexLock l(aside_mu);
      --aside;
      aside_cv.NotifyAll();
    }).detach();
  }

  struct Loop {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{asio::make_work_guard(io)};
    std::thread thread;
  };
  std::vector<std::unique_ptr<Loop>> loops;
  std::atomic<size_t> next_loop{0};
  std::map<std::string, std::unique_ptr<Service>> services;
  Mutex aside_mu;
  bool stopping GUARDED_BY(aside_mu) = false;
  int aside GUARDED_BY(aside_mu) = 0;  // probes running
  CondVar aside_cv;
};

// One attempt, from the first byte to the last (or to its deadline). Its
// handlers may run on any loop thread: each runs under the exchange's lock
// (so do Start, on the sender's thread, and the deadline), and `done` is
// called after the lock is let go.
thread_local asio::io_context* AsyncHttpClient::Impl::current_loop = nullptr;

struct AsyncHttpClient::Impl::Exchange : std::enable_shared_from_this<Exchange> {
  Exchange(Impl& c, Service& s, HttpExchangeRequest r, Done d)
      : client(c), svc(s), in(std::move(r)), done(std::move(d)) {}

  // A completion handler that runs `f` under the lock, then calls `done`
  // (once the exchange ended) without it.
  template <typename F>
  auto Guard(F f) {
    return [self = shared_from_this(), f = std::move(f)](auto&&... args) mutable {
      Done d;
      HttpExchangeResult r;
      {
        MutexLock l(self->mu);
        f(std::forward<decltype(args)>(args)...);
        self->TakeDone(&d, &r);
      }
      if (d) d(std::move(r));
    };
  }
  // `done` and the result, once the exchange ended (else nothing).
  void TakeDone(Done* d, HttpExchangeResult* r) REQUIRES(mu) {
    if (!finished || !done) return;
    *d = std::move(done);
    done = nullptr;
    *r = std::move(result);
  }

  // Takes one of the service's connections, or waits in line for one (not
  // started: no deadline yet, nothing sent).
  void Start() {
    Build();
    {
      MutexLock l(svc.mu);
      if (svc.active >= svc.config.max_connections) {
        svc.waiting.push_back(shared_from_this());
        return;
      }
      ++svc.active;
    }
    Begin();
  }

  // The attempt, from the connection on: timeout_ms starts here.
  void Begin() {
    conn = Idle();
    fresh = !conn;
    if (fresh && svc.tls_error.empty()) {
      conn = std::make_unique<Conn>();
      conn->io = &client.NextLoop();
      if (svc.tls)
        conn->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(*conn->io, *svc.ctx);
      else
        conn->plain = std::make_unique<beast::tcp_stream>(*conn->io);
    }
    // Everything of this exchange lives on its connection's loop.
    io = conn ? conn->io : &client.NextLoop();
    if (!svc.literal) resolver.emplace(*io);
    deadline.emplace(*io);
    deadline->expires_after(std::chrono::milliseconds(svc.config.timeout_ms));
    deadline->async_wait(Guard([this](const beast::error_code& ec) {
      if (ec || finished) return;
      expired = true;
      if (resolver) resolver->cancel();
      if (conn) conn->Tcp().close();
    }));
    if (!conn)
      return Fail(false,
                  "not sent: cannot load the TLS files (ca_file, client_cert_file, "
                  "client_key_file): " +
                      svc.tls_error);
    if (!fresh) return Write();
    if (svc.literal)
      return conn->Tcp().async_connect(
          *svc.literal, Guard([this](const beast::error_code& ec) { Connected(ec); }));
    resolver->async_resolve(
        svc.host, svc.port,
        Guard([this](const beast::error_code& ec, tcp::resolver::results_type results) {
          if (ec) return NotConnected();
          conn->Tcp().async_connect(results, Guard([this](const beast::error_code& e,
                                                          const tcp::endpoint&) { Connected(e); }));
        }));
  }

  // A pooled connection the peer still holds open, if any.
  std::unique_ptr<Conn> Idle() {
    while (true) {
      std::unique_ptr<Conn> c;
      {
        MutexLock l(svc.mu);
        if (svc.idle.empty()) return nullptr;
        // One of this thread's loop if there is one, else the newest.
        auto it = std::find_if(svc.idle.rbegin(), svc.idle.rend(),
                               [](const auto& conn) { return conn->io == current_loop; });
        auto at = it == svc.idle.rend() ? svc.idle.end() - 1 : std::next(it).base();
        c = std::move(*at);
        svc.idle.erase(at);
      }
      if (c->Reusable()) return c;
    }
  }

  void Build() {
    req.method_string(in.method);
    req.target(in.target);
    req.version(11);
    const bool v6 = svc.host.find(':') != std::string::npos;
    req.set(http::field::host, (v6 ? "[" + svc.host + "]" : svc.host) + ":" + svc.port);
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

  void Connected(const beast::error_code& ec) {
    if (ec) return NotConnected();
    conn->Tcp().socket().set_option(tcp::no_delay(true));
    if (svc.tls) return Handshake();
    Write();
  }

  void Handshake() {
    SSL* ssl = conn->tls->native_handle();
    if (!IsIpLiteral(svc.host)) SSL_set_tlsext_host_name(ssl, svc.host.c_str());
    if (svc.config.tls_verify)
      conn->tls->set_verify_callback(ssl::host_name_verification(svc.host));
    conn->tls->async_handshake(ssl::stream_base::client, Guard([this](const beast::error_code& ec) {
                                 if (!ec) return Write();
                                 int alert = TlsAlertOf(ec);
                                 if (RefusesTheHandshake(alert))
                                   return Fail(false, HandshakeRefusal(svc.origin, alert));
                                 if (TlsVerifyFailed(ec))
                                   return Fail(false, "not sent: the certificate of " + svc.origin +
                                                          " could not be verified (ca_file?)");
                                 if (expired) return NotConnected();
                                 Fail(false, "not sent: the TLS handshake with " + svc.origin +
                                                 " failed (" + ec.message() + ")");
                               }));
  }

  void Write() {
    if (in.may_write) {
      Status may = in.may_write();
      if (!may.ok()) {
        withheld = true;
        return Fail(false, "not sent: " + may.message());
      }
    }
    conn->With([this](auto& stream) {
      http::async_write(stream, req, Guard([this](const beast::error_code& ec, size_t) {
                          if (ec)
                            return Broken(
                                ec, "writing the request to " + svc.origin + " failed partway");
                          Read();
                        }));
    });
  }

  void Read() {
    parser.emplace();
    parser->header_limit(kHeaderLimit);
    parser->body_limit(svc.config.max_response_bytes);
    // The head first: Beast 1.74 loses the body_limit error of a head that
    // arrives with body bytes behind it when it reads both in one go.
    conn->With([this](auto& stream) {
      http::async_read_header(stream, conn->buffer, *parser,
                              Guard([this](const beast::error_code& ec, size_t) {
                                if (ec) return Broken(ec, "");
                                auto length = parser->content_length();
                                if (length && *length > svc.config.max_response_bytes)
                                  return Broken(http::error::body_limit, "");
                                ReadBody();
                              }));
    });
  }

  void ReadBody() {
    conn->With([this](auto& stream) {
      http::async_read(stream, conn->buffer, *parser,
                       Guard([this](const beast::error_code& ec, size_t) {
                         if (ec) return Broken(ec, "");
                         Replied();
                       }));
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
    int alert = TlsAlertOf(ec);
    if (fresh && svc.tls && RefusesTheHandshake(alert))
      return Fail(false, HandshakeRefusal(svc.origin, alert));
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
        *io,
        [cfg, origin] { return TlsHandshakeAlert(cfg, origin, std::min(cfg.timeout_ms, 2000)); },
        Guard([this, why](int probed) {
          if (RefusesTheHandshake(probed)) return Fail(false, HandshakeRefusal(svc.origin, probed));
          Fail(true, why);
        }));
  }

  void Replied() {
    HttpExchangeResult r;
    r.replied = true;
    auto& res = parser->get();
    r.status = static_cast<int>(res.result_int());
    r.replayed = res["Idempotent-Replayed"] == "true";
    for (const auto& name : in.reply_headers)
      if (auto h = res.find(name); h != res.end()) r.reply_headers.emplace_back(name, h->value());
    bool keep = res.keep_alive();
    r.body = std::move(res.body());
    if (keep && !expired) {
      MutexLock l(svc.mu);
      if (svc.idle.size() < static_cast<size_t>(svc.config.max_connections))
        svc.idle.push_back(std::move(conn));
    }
    End(std::move(r));
  }

  void Fail(bool sent, std::string error) {
    HttpExchangeResult r;
    r.sent = sent;
    r.too_large = too_large;
    r.withheld = withheld;
    r.error = std::move(error);
    conn.reset();  // a broken connection is never pooled
    End(std::move(r));
  }

  void End(HttpExchangeResult r) {
    if (finished) return;
    finished = true;
    if (deadline) deadline->cancel();
    result = std::move(r);
    PassOn();
  }

  // Its connection (pooled, or closed) goes to the first in line, on this
  // exchange's loop (where a pooled connection of the loop is found first).
  void PassOn() {
    std::shared_ptr<Exchange> next;
    {
      MutexLock l(svc.mu);
      if (svc.waiting.empty()) {
        --svc.active;
        return;
      }
      next = std::move(svc.waiting.front());
      svc.waiting.pop_front();
    }
    Exchange* n = next.get();
    asio::post(io ? *io : client.NextLoop(), n->Guard([n] { n->Begin(); }));
  }

  Impl& client;
  Service& svc;
  HttpExchangeRequest in;
  Done done;
  Mutex mu;
  asio::io_context* io = nullptr;  // the loop of its connection
  std::optional<tcp::resolver> resolver;
  std::optional<asio::steady_timer> deadline;
  std::unique_ptr<Conn> conn;
  http::request<http::string_body> req;
  std::optional<http::response_parser<http::string_body>> parser;
  HttpExchangeResult result;
  bool fresh = false, expired = false, too_large = false, finished = false, withheld = false;
};

AsyncHttpClient::AsyncHttpClient(int threads) : impl_(std::make_unique<Impl>(threads)) {}
AsyncHttpClient::~AsyncHttpClient() = default;

void AsyncHttpClient::AddService(const ServiceConfig& config) {
  auto s = std::make_unique<Impl::Service>();
  s->config = config;
  HttpEndpoint e = HttpEndpoint::Parse(config.base_url);
  s->tls = e.tls;
  s->host = e.host;
  s->port = e.port;
  s->origin = e.origin;
  s->prefix = e.prefix;
  if (IsIpLiteral(e.host) && e.port_number >= 0)
    s->literal = tcp::endpoint(asio::ip::make_address(e.host), e.port_number);
  if (s->tls) s->ctx = MakeClientTlsContext(config, &s->tls_error);
  impl_->services[config.name] = std::move(s);
}

bool AsyncHttpClient::OnLoopThread() { return Impl::current_loop != nullptr; }

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
  // Started here: the request is written from this thread when the socket
  // takes it at once (no hand-off to a loop thread).
  Done now;  // the exchange ended as it started (no TLS files)
  HttpExchangeResult r;
  {
    MutexLock l(x->mu);
    x->Start();
    x->TakeDone(&now, &r);
  }
  if (now) now(std::move(r));
}

}  // namespace sagad

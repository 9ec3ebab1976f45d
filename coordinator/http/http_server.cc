#include "coordinator/http/http_server.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sagad {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

// What a request target says: decoded path and query parameters.
void ParseTarget(const std::string& target, HttpRequest* req) {
  size_t q = target.find('?');
  req->path = PercentDecode(target.substr(0, q), false);
  if (q == std::string::npos) return;
  std::string query = target.substr(q + 1);
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    std::string part = query.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!part.empty()) {
      size_t eq = part.find('=');
      req->params.emplace(PercentDecode(part.substr(0, eq), true),
                          eq == std::string::npos ? "" : PercentDecode(part.substr(eq + 1), true));
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, Handler handler, ErrorHandler errors)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        errors_(std::move(errors)),
        ssl_(net::ssl::context::tls_server),
        acceptor_(io_),
        retry_(io_),
        handlers_(static_cast<size_t>(std::max(1, options_.handler_threads))) {}

  ~Impl() { Stop(); }

  Status Init() {
    if (options_.tls_cert_file.empty()) return Status::Ok();
    error_code ec;
    ssl_.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                         net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                         net::ssl::context::no_tlsv1_1,
                     ec);
    ssl_.use_certificate_chain_file(options_.tls_cert_file, ec);
    if (!ec) ssl_.use_private_key_file(options_.tls_key_file, net::ssl::context::pem, ec);
    if (ec)
      return InvalidArgument("cannot serve HTTPS with tls.cert_file " + options_.tls_cert_file +
                             " and tls.key_file " + options_.tls_key_file +
                             " (not a certificate and its private key in PEM?): " + ec.message());
    tls_ = true;
    return Status::Ok();
  }

  StatusOr<int> Bind(const std::string& host, int port) {
    error_code ec;
    auto addr = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec) {
      tcp::resolver resolver(io_);
      auto results = resolver.resolve(host, std::to_string(port), ec);
      if (ec || results.empty()) return Unavailable("cannot resolve " + host);
      addr = results.begin()->endpoint().address();
    }
    tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(options_.backlog, ec);
    if (ec) return Unavailable("cannot bind " + host + ":" + std::to_string(port) + ": " + ec.message());
    return static_cast<int>(acceptor_.local_endpoint().port());
  }

  void Serve() {
    Accept();
    std::vector<std::thread> extra;
    for (int i = 1; i < options_.io_threads; ++i) extra.emplace_back([this] { io_.run(); });
    io_.run();
    for (auto& t : extra) t.join();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    net::post(io_, [this] {
      error_code ec;
      acceptor_.close(ec);
      retry_.cancel();
    });
    io_.stop();
    handlers_.join();
  }

  size_t open_connections() const {
    std::lock_guard<std::mutex> l(conn_mu_);
    return total_;
  }

  // ---- used by sessions ----
  const HttpServerOptions& options() const { return options_; }
  void RunHandler(HttpRequest& req, HttpResponse& res) { handler_(req, res); }
  void Error(const HttpRequest& req, HttpResponse& res, int status, const std::string& detail) {
    errors_(req, res, status, detail);
  }
  net::thread_pool& handlers() { return handlers_; }
  void Release(const std::string& remote) {
    std::lock_guard<std::mutex> l(conn_mu_);
    --total_;
    auto it = per_client_.find(remote);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
  }

 private:
  template <class Stream>
  class Session;

  void Accept() {
    acceptor_.async_accept(net::make_strand(io_), [this](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || stopped_) return;
      if (ec) {  // out of file descriptors or the like: try again shortly, do not spin
        retry_.expires_after(std::chrono::milliseconds(50));
        retry_.async_wait([this](error_code e) {
          if (!e) Accept();
        });
        return;
      }
      OnAccept(std::move(socket));
      Accept();
    });
  }

  void OnAccept(tcp::socket socket) {
    error_code ec;
    auto remote = socket.remote_endpoint(ec);
    if (ec) return;
    socket.set_option(tcp::no_delay(true), ec);
    std::string addr = remote.address().to_string();
    bool over = false;
    {
      std::lock_guard<std::mutex> l(conn_mu_);
      size_t& mine = per_client_[addr];
      if (total_ >= options_.max_connections || mine >= options_.max_connections_per_client) {
        over = true;
        if (mine == 0) per_client_.erase(addr);
      } else {
        ++total_;
        ++mine;
      }
    }
    if (over) return Busy(std::move(socket));
    StartSession(std::move(socket), addr);
  }

  // Too many connections: a short 503 and close (plain text: on a TLS port
  // the client sees its handshake fail, which is as clear). Whatever the
  // client sent meanwhile is read and dropped for up to 1 s, so that it gets
  // the answer rather than a reset.
  void Busy(tcp::socket socket) {
    static const std::string kBody =
        "{\"type\":\"about:blank\",\"title\":\"Service Unavailable\",\"status\":503,"
        "\"detail\":\"too many connections\"}";
    static const std::string kBusy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
        std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
    struct Refused {
      tcp::socket socket;
      net::steady_timer timer;
      char sink[1024];
      explicit Refused(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
      void Drain(std::shared_ptr<Refused> self) {
        socket.async_read_some(net::buffer(sink), [self](error_code ec, size_t) {
          if (ec) {
            error_code ignored;
            self->timer.cancel();
            self->socket.close(ignored);
            return;
          }
          self->Drain(self);
        });
      }
    };
    auto r = std::make_shared<Refused>(std::move(socket));
    net::async_write(r->socket, net::buffer(kBusy), [r](error_code ec, size_t) {
      error_code ignored;
      if (ec) {
        r->socket.close(ignored);
        return;
      }
      r->socket.shutdown(tcp::socket::shutdown_send, ignored);
      r->timer.expires_after(std::chrono::seconds(1));
      r->timer.async_wait([r](error_code e) {
        error_code ignored2;
        if (!e) r->socket.close(ignored2);
      });
      r->Drain(r);
    });
  }

  void StartSession(tcp::socket socket, const std::string& addr);

  HttpServerOptions options_;
  Handler handler_;
  ErrorHandler errors_;
  net::ssl::context ssl_;
  bool tls_ = false;
  // Before io_: sessions still queued in io_ are destroyed with it and
  // give their connection back here.
  mutable std::mutex conn_mu_;
  size_t total_ = 0;
  std::unordered_map<std::string, size_t> per_client_;
  std::atomic<bool> stopped_{false};
  net::io_context io_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  net::thread_pool handlers_;
};

// One connection: reads requests one at a time, hands each to a handler
// thread, writes its response, and goes on while the client keeps it alive.
template <class Stream>
class HttpServer::Impl::Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(Impl& server, std::string remote, Args&&... args)
      : server_(server), remote_(std::move(remote)), stream_(std::forward<Args>(args)...) {}
  ~Session() { server_.Release(remote_); }

  void Start(bool tls) {
    auto self = this->shared_from_this();
    if (!tls) return ReadHead();
    Lowest().expires_after(server_.options().request_timeout);
    if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
      stream_.async_handshake(net::ssl::stream_base::server, [self](error_code ec) {
        if (ec) return self->Close();
        self->ReadHead();
      });
    }
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadHead() {
    parser_.emplace();
    parser_->body_limit(server_.options().body_limit);
    parser_->header_limit(static_cast<std::uint32_t>(server_.options().header_limit));
    req_ = HttpRequest{};
    req_.remote_address = remote_;
    Lowest().expires_after(served_ > 0 ? server_.options().idle_timeout
                                       : server_.options().request_timeout);
    auto self = this->shared_from_this();
    http::async_read_header(stream_, buffer_, *parser_,
                            [self](error_code ec, size_t) { self->OnHead(ec); });
  }

  void OnHead(error_code ec) {
    if (ec) return ReadFailed(ec);
    // From the first byte of a request on, the whole of it must arrive in time.
    Lowest().expires_after(server_.options().request_timeout);
    auto& m = parser_->get();
    req_.method = std::string(m.method_string());
    req_.target = std::string(m.target());
    ParseTarget(req_.target, &req_);
    for (const auto& f : m) req_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    auto self = this->shared_from_this();
    if (beast::iequals(m[http::field::expect], "100-continue") && !parser_->is_done()) {
      continue_ = std::make_shared<http::response<http::empty_body>>(http::status::continue_, m.version());
      http::async_write(stream_, *continue_, [self](error_code e, size_t) {
        if (e) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    auto self = this->shared_from_this();
    http::async_read(stream_, buffer_, *parser_, [self](error_code ec, size_t) {
      if (ec) return self->ReadFailed(ec);
      self->Dispatch();
    });
  }

  // A request that could not be read: answer what went wrong if it is worth
  // an answer, then close.
  void ReadFailed(error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == net::ssl::error::stream_truncated)
      return Close();
    if (ec == beast::error::timeout) {
      // Idle between requests, or never sent a byte: just close. A request
      // that started and stalled gets a 408.
      if (!parser_ || (!parser_->got_some() && buffer_.size() == 0)) return Close();
      return Fail(408, "the request did not arrive within " +
                           std::to_string(server_.options().request_timeout.count()) + " ms");
    }
    if (ec == http::error::body_limit)
      return Fail(413, "request body too large: at most " +
                           std::to_string(server_.options().body_limit) + " bytes");
    if (ec == http::error::header_limit)
      return Fail(431, "request head larger than " +
                           std::to_string(server_.options().header_limit) + " bytes");
    Fail(400, "malformed HTTP request: " + ec.message());
  }

  void Fail(int status, const std::string& detail) {
    res_ = HttpResponse{};
    server_.Error(req_, res_, status, detail);
    res_.set_header("Connection", "close");
    close_after_ = true;
    Send();
  }

  void Dispatch() {
    Lowest().expires_never();
    auto& m = parser_->get();
    keep_alive_ = m.keep_alive();
    version_ = m.version();
    req_.body = std::move(m.body());
    res_ = HttpResponse{};
    auto self = this->shared_from_this();
    // Whether the handler deferred, and whether the response went out, as
    // atomics of their own: once a deferred response is completed, res_
    // belongs to the event loop (Send resets it), not to the handler thread.
    struct Exchange {
      std::atomic<bool> deferred{false};
      std::atomic<bool> sent{false};
    };
    auto state = std::make_shared<Exchange>();
    auto complete = [self, state] {
      if (state->sent.exchange(true)) return;
      net::post(self->stream_.get_executor(), [self] { self->Send(); });
    };
    res_.set_on_complete(complete);
    res_.set_on_defer([state] { state->deferred = true; });
    net::post(server_.handlers(), [self, state, complete] {
      std::string error;
      try {
        self->server_.RunHandler(self->req_, self->res_);
      } catch (const std::exception& e) {
        error = std::string("internal error: ") + e.what();
      } catch (...) {
        error = "internal error";
      }
      if (state->deferred) return;  // its completion sends it
      if (!error.empty()) {
        self->res_ = HttpResponse{};
        self->server_.Error(self->req_, self->res_, 500, error);
      }
      complete();
    });
  }

  void Send() {
    bool close = close_after_ || !keep_alive_;
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->version(version_ ? version_ : 11);
    msg->result(static_cast<unsigned>(res_.status));
    for (const auto& [k, v] : res_.headers) {
      if (beast::iequals(k, "Connection") && beast::iequals(v, "close")) close = true;
      if (!beast::iequals(k, "Connection")) msg->set(k, v);
    }
    if (!res_.content_type.empty()) msg->set(http::field::content_type, res_.content_type);
    msg->body() = std::move(res_.body);
    res_ = HttpResponse{};  // it held the completion, and so this session: no cycle
    msg->keep_alive(!close);
    msg->prepare_payload();
    Lowest().expires_after(server_.options().request_timeout);
    auto self = this->shared_from_this();
    http::async_write(stream_, *msg, [self, msg, close](error_code ec, size_t) {
      if (ec) return self->Close();
      ++self->served_;
      if (close) return self->Linger();
      self->ReadHead();
    });
  }

  // Half-close, then read what the client still sends (the body of a
  // refused request) for up to 2 s, so it reads our answer, not a reset.
  void Linger() {
    error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    Lowest().expires_after(std::chrono::seconds(2));
    Drain();
  }

  void Drain() {
    auto self = this->shared_from_this();
    Lowest().async_read_some(net::buffer(drain_), [self](error_code ec, size_t) {
      if (ec) return self->Close();
      self->Drain();
    });
  }

  void Close() {
    res_ = HttpResponse{};
    error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();
  }

  Impl& server_;
  std::string remote_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::empty_body>> continue_;
  HttpRequest req_;
  HttpResponse res_;
  bool keep_alive_ = false;
  bool close_after_ = false;
  unsigned version_ = 11;
  int served_ = 0;
  char drain_[4096];
};

void HttpServer::Impl::StartSession(tcp::socket socket, const std::string& addr) {
  if (tls_) {
    auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, addr, std::move(socket), ssl_);
    s->Start(true);
  } else {
    auto s = std::make_shared<Session<beast::tcp_stream>>(*this, addr, std::move(socket));
    s->Start(false);
  }
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler, ErrorHandler errors)
    : impl_(new Impl(std::move(options), std::move(handler), std::move(errors))) {}
HttpServer::~HttpServer() = default;
Status HttpServer::Init() { return impl_->Init(); }
StatusOr<int> HttpServer::Bind(const std::string& host, int port) { return impl_->Bind(host, port); }
void HttpServer::Serve() { impl_->Serve(); }
void HttpServer::Stop() { impl_->Stop(); }
size_t HttpServer::open_connections() const { return impl_->open_connections(); }

}  // namespace sagad

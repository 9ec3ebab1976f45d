#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>

#include "coordinator/http/http_server_impl.h"

namespace sagad {

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

// One connection: reads requests one at a time, hands each to a handler
// thread, writes its response, and goes on while the client keeps it alive.
template <class Stream>
class HttpServer::Impl::Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(Impl& server, std::string remote, Args&&... args)
      : server_(server),
        remote_(std::move(remote)),
        stream_(std::forward<Args>(args)...),
        watch_timer_(stream_.get_executor()) {}
  ~Session() {
    if (serving_) server_.Serving(false);
    if (!released_) server_.Release(remote_);
  }

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
  // Whether the handler deferred, and whether the response went out, as
  // atomics of their own: once a deferred response is completed, res_
  // belongs to the event loop (Send resets it), not to the handler thread.
  struct Exchange {
    std::atomic<bool> deferred{false};
    std::atomic<bool> sent{false};
    std::shared_ptr<Abandonment> abandon = std::make_shared<Abandonment>();
  };

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void ReadHead() {
    if (server_.draining()) return Close();
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
    for (const auto& f : m)
      req_.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    if (std::string why = RefuseCoding(); !why.empty())
      return Fail(parser_->chunked() ? 501 : 400, why);
    auto self = this->shared_from_this();
    if (m.count(http::field::expect) > 0) {
      if (!beast::iequals(m[http::field::expect], "100-continue") ||
          m.count(http::field::expect) > 1)
        return Fail(417, "the only expectation understood is Expect: 100-continue");
      if (!parser_->is_done()) return Continue();
    }
    ReadBody();
  }

  // Empty when the request's Transfer-Encoding (if any) is plain chunked;
  // else why it is refused (RFC 9112 6.1: a request whose last coding is not
  // chunked has no reliable end, so nothing after it may be read).
  std::string RefuseCoding() {
    auto& m = parser_->get();
    if (m.count(http::field::transfer_encoding) == 0) return "";
    if (!parser_->chunked())
      return "Transfer-Encoding must end with chunked (RFC 9112 6.1); the connection is closed";
    auto range = m.equal_range(http::field::transfer_encoding);
    for (auto it = range.first; it != range.second; ++it) {
      std::string v(it->value());
      size_t pos = 0;
      while (pos <= v.size()) {
        size_t comma = v.find(',', pos);
        std::string token =
            v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        token.erase(0, token.find_first_not_of(" \t"));
        token.erase(token.find_last_not_of(" \t") + 1);
        if (!token.empty() && !beast::iequals(token, "chunked"))
          return "Transfer-Encoding '" + token +
                 "' is not supported: send the body chunked or "
                 "with a Content-Length";
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    }
    return "";
  }

  // Expect: 100-continue: the head is judged first; only an accepted
  // request is told to send its body.
  void Continue() {
    auto& m = parser_->get();
    res_ = HttpResponse{};
    if (server_.options().head_check && !server_.options().head_check(req_, res_)) {
      res_.set_header("Connection", "close");
      close_after_ = true;
      return Send();
    }
    res_ = HttpResponse{};
    auto self = this->shared_from_this();
    {
      continue_ =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, m.version());
      http::async_write(stream_, *continue_, [self](error_code e, size_t) {
        if (e) return self->Close();
        self->ReadBody();
      });
    }
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
    server_.Serving(true);
    serving_ = true;
    auto& m = parser_->get();
    keep_alive_ = m.keep_alive();
    version_ = m.version();
    req_.body = std::move(m.body());
    res_ = HttpResponse{};
    auto self = this->shared_from_this();
    auto state = std::make_shared<Exchange>();
    exchange_ = state;
    auto complete = [self, state] {
      if (state->sent.exchange(true)) return;
      net::post(self->stream_.get_executor(), [self] { self->Send(); });
    };
    res_.set_on_complete(complete);
    res_.set_on_defer([state] { state->deferred = true; });
    res_.set_abandonment(state->abandon);
    // A probe answered on the loop: it needs no handler thread, so it is
    // answered even when every handler is busy.
    if (server_.options().on_loop && server_.options().on_loop(req_, res_)) return complete();
    server_.Handle([self, state, complete] {
      std::string error;
      try {
        self->server_.RunHandler(self->req_, self->res_);
      } catch (const std::exception& e) {
        error = std::string("internal error: ") + e.what();
      } catch (...) {
        error = "internal error";
      }
      if (state->deferred) {  // its completion sends it; meanwhile, watch the client
        net::post(self->stream_.get_executor(), [self, state] { self->Watch(state); });
        return;
      }
      if (!error.empty()) {
        self->res_ = HttpResponse{};
        self->server_.Error(self->req_, self->res_, 500, error);
      }
      complete();
    });
  }

  // While a deferred response waits, a client that closes or resets its
  // connection abandons it: its wait is dropped and its slot freed at once.
  // The socket is only peeked at (the bytes of a next request stay for it).
  // `state`: the exchange that deferred (it may be answered, and the next one
  // under way, by the time this runs: then there is nothing to watch).
  void Watch(const std::shared_ptr<Exchange>& state) {
    if (exchange_ != state || state->sent || !Lowest().socket().is_open()) return;
    auto self = this->shared_from_this();
    Lowest().socket().async_wait(tcp::socket::wait_read, [self, state](error_code ec) {
      if (ec || state->sent || self->exchange_ != state) return;
      if (self->PeerGone()) return self->Abandon();
      self->WatchLater(state);  // a next request's bytes: look again later
    });
  }

  void WatchLater(const std::shared_ptr<Exchange>& state) {
    auto self = this->shared_from_this();
    watch_timer_.expires_after(std::chrono::milliseconds(250));
    watch_timer_.async_wait([self, state](error_code ec) {
      if (ec || state->sent || self->exchange_ != state) return;
      if (self->PeerGone()) return self->Abandon();
      self->WatchLater(state);
    });
  }

  // The peer closed (EOF, or FIN behind unread bytes) or reset the connection.
  bool PeerGone() {
    int fd = Lowest().socket().native_handle();
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    tcp_info info{};
    socklen_t len = sizeof info;
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
           (info.tcpi_state == TCP_CLOSE_WAIT || info.tcpi_state == TCP_CLOSE);
  }

  void Abandon() {
    auto state = exchange_;
    state->abandon->Fire();  // the handler stops waiting; it no longer touches res_
    if (!state->sent.exchange(true)) EndServing();
    Close();
  }

  void EndServing() {
    if (!serving_) return;
    serving_ = false;
    server_.Serving(false);
  }

  void Send() {
    error_code ignored;
    watch_timer_.cancel();
    Lowest().socket().cancel(ignored);  // a pending Watch; no read or write is pending now
    exchange_.reset();
    bool close = close_after_ || !keep_alive_ || server_.draining();
    bool head = req_.method == "HEAD";
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
    if (msg->count("X-Content-Type-Options") == 0) msg->set("X-Content-Type-Options", "nosniff");
    msg->keep_alive(!close);
    msg->prepare_payload();
    if (head) msg->body().clear();  // Content-Length stays that of the GET
    Lowest().expires_after(server_.options().request_timeout);
    auto self = this->shared_from_this();
    http::async_write(stream_, *msg, [self, msg, close](error_code ec, size_t) {
      self->EndServing();
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
    watch_timer_.cancel();
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    Lowest().close();
    if (!released_) {  // the slot is free now, whoever still holds this session
      released_ = true;
      server_.Release(remote_);
    }
  }

  Impl& server_;
  std::string remote_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::empty_body>> continue_;
  HttpRequest req_;
  HttpResponse res_;
  std::shared_ptr<Exchange> exchange_;  // the request being served, if any
  net::steady_timer watch_timer_;
  bool serving_ = false;   // counted in the server's Serving
  bool released_ = false;  // the connection slot given back
  bool keep_alive_ = false;
  bool close_after_ = false;
  unsigned version_ = 11;
  int served_ = 0;
  char drain_[4096];
};

void HttpServer::Impl::StartSession(tcp::socket socket, const std::string& addr) {
  if (tls_) {
    auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
        *this, addr, std::move(socket), *ssl_);
    s->Start(true);
  } else {
    auto s = std::make_shared<Session<beast::tcp_stream>>(*this, addr, std::move(socket));
    s->Start(false);
  }
}

}  // namespace sagad

#include "coordinator/http/http_server_impl.h"

namespace sagad {

// Too many connections: a short 503 and close (plain text: on a TLS port
// the client sees its handshake fail, which is as clear). Whatever the
// client sent meanwhile is read and dropped for up to 1 s, so that it gets
// the answer rather than a reset.
void HttpServer::Impl::Busy(tcp::socket socket) {
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

HttpServer::HttpServer(HttpServerOptions options, Handler handler, ErrorHandler errors)
    : impl_(new Impl(std::move(options), std::move(handler), std::move(errors))) {}
HttpServer::~HttpServer() = default;
Status HttpServer::Init() { return impl_->Init(); }
StatusOr<int> HttpServer::Bind(const std::string& host, int port) {
  return impl_->Bind(host, port);
}
void HttpServer::Serve() { impl_->Serve(); }
void HttpServer::OnLoopEvery(std::chrono::milliseconds every, std::function<void()> fn) {
  impl_->OnLoopEvery(every, std::move(fn));
}
void HttpServer::OnReadable(int fd, std::function<void()> readable) {
  impl_->OnReadable(fd, std::move(readable));
}
void HttpServer::Stop() { impl_->Stop(); }
void HttpServer::StopAccepting() { impl_->StopAccepting(); }
bool HttpServer::WaitIdle(std::chrono::milliseconds timeout) { return impl_->WaitIdle(timeout); }
bool HttpServer::BoundToLoopback() const { return impl_->BoundToLoopback(); }
size_t HttpServer::open_connections() const { return impl_->open_connections(); }

}  // namespace sagad

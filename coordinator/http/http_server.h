// HttpServer: an asynchronous HTTP/1.1 server (Boost.Asio + Boost.Beast)
// that no client can starve.
//
//   * No thread per connection: sockets are served by `io_threads` event
//     loops; a request's handler runs on a fixed pool of `handler_threads`,
//     and a handler that waits (a long poll) defers its response instead of
//     holding a thread (HttpResponse::Defer).
//   * Deadlines: the head and the body of a request must arrive within
//     `request_timeout` (a client trickling a header line every 2 s is cut
//     off); a kept-alive connection may idle `idle_timeout` between requests;
//     a response must be taken within `request_timeout`.
//   * Caps: at most `max_connections` open connections, and
//     `max_connections_per_client` per remote address; beyond them a new
//     connection gets a 503 and is closed. The listen backlog is `backlog`.
//   * Framing errors (a bad Content-Length, a head too large, a body over
//     `body_limit`) get an error response and the connection is closed after
//     the client's remaining bytes are drained (so the client reads the
//     answer instead of a reset).
// HTTPS when tls_cert_file/tls_key_file are set.
// Thread-safety: Bind, Serve and Stop from the owning thread; Serve blocks
// until Stop (which may be called from another thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "coordinator/http/http_message.h"
#include "sagas/status.h"

namespace sagad {

struct HttpServerOptions {
  int io_threads = 1;
  int handler_threads = 32;
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{30000};
  size_t max_connections = 10000;
  size_t max_connections_per_client = 2000;
  size_t body_limit = 1 << 20;
  size_t header_limit = 16 << 10;
  int backlog = 4096;
  std::string tls_cert_file, tls_key_file;
};

class HttpServer {
 public:
  // Serves one request: fill `res` (or Defer it). Runs on a handler thread.
  using Handler = std::function<void(HttpRequest& req, HttpResponse& res)>;
  // Fills `res` for an error the server found itself (status 400, 408, 413,
  // 431, 503) before any handler ran; `req` holds what was read of it.
  using ErrorHandler = std::function<void(const HttpRequest& req, HttpResponse& res, int status,
                                          const std::string& detail)>;

  HttpServer(HttpServerOptions options, Handler handler, ErrorHandler errors);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files if configured; InvalidArgument when they cannot be.
  Status Init();
  // Binds host:port (0: any free port); the bound port, or Unavailable.
  StatusOr<int> Bind(const std::string& host, int port);
  void Serve();
  void Stop();
  // Connections open now (for tests and metrics).
  size_t open_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad

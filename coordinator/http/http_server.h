// HttpServer: an asynchronous HTTP/1.1 server (Boost.Asio + Boost.Beast)
// that no client can starve.
//
//   * No thread per connection: sockets are served by `io_threads` event
//     loops; a request's handler runs where `run_handler` puts it (sagad:
//     the engine's housekeeping threads), else on a pool of
//     `handler_threads` of the server's own, and a handler that waits (a
//     long poll) defers its response instead of holding a thread
//     (HttpResponse::Defer).
//   * Deadlines: the head and the body of a request must arrive within
//     `request_timeout` (a client trickling a header line every 2 s is cut
//     off); a kept-alive connection may idle `idle_timeout` between requests;
//     a response must be taken within `request_timeout`.
//   * Caps: at most `max_connections` open connections, and
//     `max_connections_per_client` per remote address; beyond them a new
//     connection gets a 503 and is closed. The listen backlog is `backlog`.
//   * Framing errors (a bad Content-Length, a head too large, a body over
//     `body_limit`, a Transfer-Encoding whose last coding is not chunked: 400
//     per RFC 9112 6.1, or a coding other than chunked: 501) get an error
//     response and the connection is closed after the client's remaining
//     bytes are drained (so the client reads the answer instead of a reset;
//     nothing after a refused head is ever parsed as a request).
//   * Expect: 100-continue is answered only once `head_check` accepted the
//     head (an anonymous client is refused before it uploads a body); any
//     other expectation gets 417.
//   * HEAD is served as the handler answers it (its body is not sent).
//   * A deferred response whose client goes away (EOF or reset while the
//     handler waits) fires the response's Abandonment and frees the
//     connection's slot at once.
//   * Every response carries X-Content-Type-Options: nosniff.
//   * Draining: StopAccepting closes the listener; responses then close
//     their connection; WaitIdle waits for the answers still owed.
// HTTPS when tls_cert_file/tls_key_file are set.
// Thread-safety: Bind, Serve and Stop from the owning thread; Serve blocks
// until Stop (which may be called from another thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "coordinator/http/http_message.h"
#include "util/status.h"

namespace sagad {

struct HttpServerOptions {
  int io_threads = 1;
  // Where handlers run: `run_handler(task)` runs the task soon on a thread
  // that may block (never inside the call). Empty: on a pool of
  // `handler_threads` threads of the server's own.
  std::function<void(std::function<void()>)> run_handler;
  int handler_threads = 32;
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{30000};
  size_t max_connections = 10000;
  size_t max_connections_per_client = 2000;
  size_t body_limit = 1 << 20;
  size_t header_limit = 16 << 10;
  int backlog = 4096;
  std::string tls_cert_file, tls_key_file;
  // Judges a request from its head alone, before a 100 Continue: false (and
  // `res` filled) refuses it and closes the connection. Empty: all pass.
  std::function<bool(const HttpRequest& req, HttpResponse& res)> head_check;
  // Answers a request on the event loop itself, before any handler thread
  // sees it: true when it filled `res` (a liveness probe, answered even
  // while every handler thread is busy). It must not block or take a lock
  // that anything holds across a wait. Empty: every request goes to a
  // handler.
  std::function<bool(const HttpRequest& req, HttpResponse& res)> on_loop;
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
  // Runs the event loop on the calling thread (and io_threads - 1 more)
  // until Stop.
  void Serve();
  // Before Serve: `fn` runs on the event loop every `every`, and `readable`
  // each time `fd` can be read (it reads it; both must not block), until
  // Stop. The process's own chores ride on the loop this way (sagad: the
  // store's watchdog, the stop signals through a signalfd) instead of
  // holding a thread each.
  void OnLoopEvery(std::chrono::milliseconds every, std::function<void()> fn);
  void OnReadable(int fd, std::function<void()> readable);
  // Closes the listener; from now on each response closes its connection
  // and no further request is read. Thread-safe.
  void StopAccepting();
  // Blocks until no request is being served (every answer owed is written),
  // or `timeout`; true when idle. Thread-safe.
  bool WaitIdle(std::chrono::milliseconds timeout);
  void Stop();
  // Whether the address Bind bound is a loopback one.
  bool BoundToLoopback() const;
  // Connections open now (for tests and metrics).
  size_t open_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad

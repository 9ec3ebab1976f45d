// AsyncHttpClient: the asynchronous HTTP/1.1 client of HttpAdapter, on
// Boost.Beast: an event loop run by `threads` threads. No caller waits for a
// downstream: Send starts the exchange (the request is written from the
// caller's thread when the socket takes it at once) and returns; `done`
// runs on a loop thread when the exchange is over. `done` may block (the
// engine records the outcome there): the other loop threads go on.
//
// Contract:
// - A keep-alive pool per service; an idle connection the peer closed is
//   never reused. At most `max_connections` of the service's exchanges are
//   under way at once (one connection each); the others wait in line,
//   nothing sent and no deadline running, and take a connection in the order
//   they came as one is let go.
// - `timeout_ms` of the service is the deadline of the whole attempt, from
//   when it has its connection: resolving, connecting, the TLS handshake,
//   writing, and the whole reply.
//   A downstream that drips its reply a byte at a time is cut off at it.
// - A service whose host is an IP address is connected to without a name
//   lookup (no resolver, whose first use starts a thread of Asio's).
// - The reply body is read up to `max_response_bytes`; a larger one is not
//   buffered (too_large).
// - HTTPS as the service says: its CA bundle (else the system's), host name
//   verification unless tls_verify is false, a client certificate for
//   mutual TLS.
// - `sent` is false only when the request cannot have been acted on: it
//   never left (no connection, no TLS session), or the server refused the
//   TLS handshake (an alert that only a refused handshake sends, read on a
//   connection this exchange opened; a connection reset there is re-judged
//   with a probe handshake, tls_probe.h). Anything else after the request
//   began to leave is `sent` (the outcome is unknown).
// Thread-safety: AddService before any Send; Send from any thread.
// Destroying the client ends the loop: an exchange still under way never
// calls `done` (callers end their exchanges first; the engine waits for its
// steps under way before it stops).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapters/adapter.h"

namespace sagad {

struct HttpExchangeRequest {
  std::string service;
  std::string method;
  std::string target;  // path and query, with the service's prefix
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent (with Content-Length) unless empty
  // Optional: asked right before the first byte is written (the connection
  // is taken: any wait in line is over); not ok: nothing is written, the
  // exchange ends with sent false and withheld true.
  std::function<Status()> may_write;
  // Headers of the reply to hand back (HttpExchangeResult::reply_headers).
  std::vector<std::string> reply_headers;
};

struct HttpExchangeResult {
  bool replied = false;  // a whole reply arrived: status, body, replayed
  int status = 0;
  std::string body;
  bool replayed = false;  // Idempotent-Replayed: true
  // Those of the request's reply_headers the reply has, with their values.
  std::vector<std::pair<std::string, std::string>> reply_headers;
  // When !replied:
  bool sent = true;        // false: the request cannot have been acted on
  bool too_large = false;  // the body was larger than max_response_bytes
  bool withheld = false;   // may_write refused it: never written
  std::string error;       // what happened and where, in words
};

class AsyncHttpClient {
 public:
  using Done = std::function<void(HttpExchangeResult)>;

  explicit AsyncHttpClient(int threads = 1);
  ~AsyncHttpClient();
  AsyncHttpClient(const AsyncHttpClient&) = delete;
  AsyncHttpClient& operator=(const AsyncHttpClient&) = delete;

  void AddService(const ServiceConfig& config);
  // The path prefix of its base URL ("" or "/prefix").
  std::string Prefix(const std::string& service) const;

  void Send(HttpExchangeRequest req, Done done);
  // True on a thread that runs one of the loops (of any client): waiting
  // there for an exchange could wait for ever.
  static bool OnLoopThread();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad

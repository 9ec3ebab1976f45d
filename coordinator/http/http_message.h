// HttpRequest / HttpResponse: one HTTP exchange as the API handlers see it,
// free of the server library (Boost.Beast stays inside http_server.cc).
//
// A handler fills the response and returns; or, to answer later without
// holding a thread (a long poll), calls Defer() and invokes the returned
// function once the response is filled, from any thread.
// Thread-safety: one exchange is used by one thread at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace sagad {

struct HttpRequest {
  std::string method;
  std::string target;                              // as received: path and query, percent-encoded
  std::string path;                                // percent-decoded path
  std::multimap<std::string, std::string> params;  // decoded query parameters
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<std::string> matches;  // the route pattern's groups, [0] = whole path
  std::string remote_address;

  // First value of header `name` (case-insensitive), or "".
  std::string get_header_value(const std::string& name) const;
  size_t get_header_value_count(const std::string& name) const;
  bool has_header(const std::string& name) const { return get_header_value_count(name) > 0; }
  bool has_param(const std::string& name) const { return params.count(name) > 0; }
  std::string get_param_value(const std::string& name) const;
};

// What a deferred response does if its client goes away first: the server
// fires it (once) when the peer closes or resets the connection before the
// answer is sent; the handler registers, with Set, how to stop waiting.
// Thread-safety: Set and Fire may race; `f` runs exactly once if both happen.
class Abandonment {
 public:
  // `f` must leave the response untouched once it returns (or have completed
  // it already). Runs at once when the client is already gone.
  void Set(std::function<void()> f);
  void Fire();

 private:
  Mutex mu_;
  bool fired_ GUARDED_BY(mu_) = false;
  std::function<void()> f_ GUARDED_BY(mu_);
};

class HttpResponse {
 public:
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string content_type;

  void set_header(const std::string& name, const std::string& value);
  void set_content(std::string content, const std::string& type) {
    body = std::move(content);
    content_type = type;
  }
  void set_content(const char* data, size_t size, const std::string& type) {
    body.assign(data, size);
    content_type = type;
  }

  // The response will be completed later: call the returned function (once)
  // when it is filled. Without Defer() it is sent when the handler returns.
  std::function<void()> Defer();
  bool deferred() const { return deferred_; }
  // For a deferred response: what stops the wait if the client goes away
  // (see Abandonment). Without it an abandoned wait runs to its end. Call it
  // before anything may complete the response (it never fires before the
  // handler has returned).
  void OnAbandon(std::function<void()> f) {
    if (abandon_) abandon_->Set(std::move(f));
  }

  // Set by the server before the handler runs: what completes the response,
  // and what Defer() tells the server (from the handler's thread).
  void set_on_complete(std::function<void()> f) { on_complete_ = std::move(f); }
  void set_on_defer(std::function<void()> f) { on_defer_ = std::move(f); }
  void set_abandonment(std::shared_ptr<Abandonment> a) { abandon_ = std::move(a); }

 private:
  bool deferred_ = false;
  std::shared_ptr<Abandonment> abandon_;
  std::function<void()> on_complete_;
  std::function<void()> on_defer_;
};

// A deferred response answered from whatever thread finishes the work (a
// waiter, a commit's continuation): Give fills and completes it once,
// unless its client went away first; after the abandonment nothing touches
// the response. Its lock guards only this one response: no table's lock is
// held while it is filled.
// Thread-safety: Give and the abandonment may race from any threads.
class DeferredAnswer {
 public:
  // Defers `res`. `on_abandon` runs (once, from the server's thread) if the
  // client goes away before the answer is given; it must not block.
  static std::shared_ptr<DeferredAnswer> Start(HttpResponse& res, std::function<void()> on_abandon);
  // Fills the response with `fill` and completes it; false when the client
  // was gone or the answer was given already (`fill` is not called).
  bool Give(const std::function<void(HttpResponse&)>& fill);

 private:
  Mutex mu_;
  bool over_ GUARDED_BY(mu_) = false;
  HttpResponse* res_ = nullptr;
  std::function<void()> complete_ GUARDED_BY(mu_);  // empty once given or abandoned
};

// %XX decoded; '+' as a space too when `plus_is_space` (query strings).
std::string PercentDecode(const std::string& s, bool plus_is_space);
// Fills req->path and req->params from `target` (path and query, as received).
void ParseTarget(const std::string& target, HttpRequest* req);

}  // namespace sagad

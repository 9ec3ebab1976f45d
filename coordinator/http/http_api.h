// ApiServer: the coordinator's HTTP API (docs/configuration.md) (JSON; errors are
// application/problem+json, RFC 9457). Maps requests onto the Engine and
// checks bearer tokens and roles. Thread-safety: Bind, the chores and Serve
// from one thread, Stop from another; requests are served concurrently on
// the engine's housekeeping threads (Engine::PostHouse).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/engine/engine.h"
#include "coordinator/http/api_options.h"
#include "coordinator/http/http_message.h"

namespace sagad {

class ApiServer {
 public:
  ApiServer(Engine& engine, const ApiOptions& options);
  ~ApiServer();

  // Binds host:port (port 0 picks a free one). Returns the bound port or
  // Unavailable if the address cannot be bound.
  StatusOr<int> Bind(const std::string& host, int port);
  // Serves until Stop() (from another thread); call after Bind. sagad
  // serves on its main thread.
  void Serve();
  void Stop();
  // Before Serve: chores of the process on the API's event loop
  // (HttpServer::OnLoopEvery, OnReadable): `fn` every `every`, `readable`
  // each time `fd` can be read. Neither may block.
  void OnLoopEvery(std::chrono::milliseconds every, std::function<void()> fn);
  void OnReadable(int fd, std::function<void()> readable);
  void SetReady(bool ready);
  // "METHOD /openapi/path" for every route served (for the OpenAPI check).
  std::vector<std::string> RegisteredRoutes() const;

  // Serves one request inside this process, as a connection does once it
  // has read it: no socket, no handler thread (the simulator's clients,
  // coordinator/sim/). `req` needs its method, target, headers and body;
  // `done` runs once the response is complete, maybe inside this call, and
  // the caller keeps `req` and `res` until then. Firing `gone` is the
  // client going away (Abandonment), from the caller's thread, once this
  // returned. Call only while no server is serving (Bind not called).
  void Exchange(HttpRequest& req, HttpResponse& res, std::shared_ptr<Abandonment> gone,
                std::function<void()> done);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sagad

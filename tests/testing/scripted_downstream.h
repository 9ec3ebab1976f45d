// ScriptedDownstream: an Adapter (the boundary the engine's parts talk to
// downstream services through, not a thing under test) that answers as it is
// told and, at each call, reads the store to check that the request's
// STARTED (or COMPENSATING) record is already durable. Calls may come from
// several threads; read what it saw with Calls() / Queries() (copies taken
// under its lock) once the test waited for the instance.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "adapters/adapter.h"
#include "coordinator/store/store.h"

namespace sagad::testing {

class ScriptedDownstream : public Adapter {
 public:
  ScriptedDownstream(Store& store, const std::vector<std::string>& services) : store_(store) {
    for (const auto& name : services) {
      services_[name].name = name;
      services_[name].retry.max_attempts = 3;
    }
  }
  CallResult Call(const CallRequest& req) override {
    auto op = store_.GetOperation(req.idempotency_key);
    bool durable = op.ok() && (op->state == "STARTED" || op->state == "COMPENSATING");
    CallResult r;
    std::function<void(const CallRequest&)> hook;
    {
      std::lock_guard<std::mutex> l(mu_);
      calls.push_back(req);
      durable_before_send.push_back(durable);
      r.outcome = answers.empty() ? Outcome::kCommitted : answers.front();
      if (!answers.empty()) answers.pop_front();
      hook = on_call;
    }
    if (hook) hook(req);  // outside the lock: it may wait for other calls
    if (r.outcome == Outcome::kCommitted) {
      r.http_status = 201;
      r.external_ref = "R-" + req.step;
      r.result = {{"ref", r.external_ref}};
    } else {
      r.http_status = r.outcome == Outcome::kFailed ? 422 : 503;
      r.error = "scripted";
    }
    return r;
  }
  // With `defer` set, CallAsync keeps each call and its continuation in
  // `deferred` (the reply is made when the test runs it, on any thread),
  // as an adapter with an event loop does; else it answers at once.
  // With `threaded` set, each call is made and answered on a thread of its
  // own (an adapter with an event loop, whose calls are in flight at once);
  // JoinThreads waits for them.
  void CallAsync(const CallRequest& req, CallDone done) override {
    if (threaded) {
      std::lock_guard<std::mutex> l(mu_);
      threads_.emplace_back([this, req, done] { done(Call(req)); });
      return;
    }
    if (!defer) return done(Call(req));
    std::lock_guard<std::mutex> l(mu_);
    deferred.push_back([this, req, done] { done(Call(req)); });
  }
  void JoinThreads() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> l(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  ~ScriptedDownstream() override { JoinThreads(); }
  QueryResult Query(const std::string&, const std::string& key, const std::string&, uint64_t, int,
                    const TraceContext&) override {
    std::lock_guard<std::mutex> l(mu_);
    queries.push_back(key);
    QueryResult q;
    q.outcome = query_answer;
    if (q.outcome == QueryOutcome::kHappened) {
      q.external_ref = "R-found";
      q.result = {{"ref", "R-found"}};
    } else if (q.outcome == QueryOutcome::kRefused) {
      q.error = "the downstream says the request was refused (scripted)";
    }
    return q;
  }
  const ServiceConfig* Service(const std::string& name) const override {
    auto it = services_.find(name);
    return it == services_.end() ? nullptr : &it->second;
  }
  std::vector<CallRequest> Calls() const {
    std::lock_guard<std::mutex> l(mu_);
    return calls;
  }
  // The calls kept so far (`defer`), and the i-th one's reply (run it on
  // any thread), while calls may still come.
  size_t DeferredCount() const {
    std::lock_guard<std::mutex> l(mu_);
    return deferred.size();
  }
  std::function<void()> Deferred(size_t i) const {
    std::lock_guard<std::mutex> l(mu_);
    return deferred.at(i);
  }
  std::vector<bool> DurableBeforeSend() const {
    std::lock_guard<std::mutex> l(mu_);
    return durable_before_send;
  }

  std::atomic<bool> defer{false};
  std::atomic<bool> threaded{false};
  std::vector<std::function<void()>> deferred;  // under mu_ while calls may come
  // Set before the first call (or under no concurrent call).
  std::deque<Outcome> answers;  // in call order; then kCommitted
  QueryOutcome query_answer = QueryOutcome::kUnknown;
  std::function<void(const CallRequest&)> on_call;  // run at each call, after it is recorded
  // What it saw (read directly only when no call can be under way).
  std::vector<CallRequest> calls;
  std::vector<bool> durable_before_send;
  std::vector<std::string> queries;

 private:
  mutable std::mutex mu_;
  std::vector<std::thread> threads_;  // threaded calls
  Store& store_;
  std::map<std::string, ServiceConfig> services_;
};

}  // namespace sagad::testing

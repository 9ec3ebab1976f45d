// HttpAdapter: the Adapter over HTTP/1.1, speaking the downstream protocol
// (docs/downstream-protocol.md): every call carries Idempotency-Key,
// Saga-Instance, Saga-Step, Saga-Fencing-Token, Saga-Attempt and the trace;
// what comes back is classified (classify.h). The exchanges run on an
// asynchronous client (http_client.h: one event loop, a keep-alive pool per
// service, timeout_ms the deadline of the whole attempt): CallAsync and
// QueryAsync answer on its loop threads; Call and Query wait for them (never
// on a loop thread: that one might be the thread the answer needs).
// Thread-safety: safe for concurrent calls.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/adapter.h"

namespace sagad {

class AsyncHttpClient;

class HttpAdapter : public Adapter {
 public:
  // `threads`: how many threads run the client's event loop (replies are
  // handled, and the engine records them, on those threads).
  explicit HttpAdapter(std::map<std::string, ServiceConfig> services, int threads = 2);
  ~HttpAdapter() override;

  // Adapter
  CallResult Call(const CallRequest& req) override;
  QueryResult Query(const std::string& service, const std::string& key,
                    const std::string& instance_id, uint64_t fencing_token, int attempt,
                    const TraceContext& trace) override;
  void CallAsync(const CallRequest& req, CallDone done) override;
  void QueryAsync(const std::string& service, const std::string& key,
                  const std::string& instance_id, uint64_t fencing_token, int attempt,
                  const TraceContext& trace, QueryDone done) override;
  const ServiceConfig* Service(const std::string& name) const override;
  std::vector<std::string> ServiceNames() const override;

 private:
  std::map<std::string, ServiceConfig> services_;
  std::unique_ptr<AsyncHttpClient> client_;
};

// The blocking Call and Query of an adapter whose answers come on event
// loops: they wait for its CallAsync / QueryAsync. Never on a loop thread
// (that one might be the thread the answer needs), nor where waiting is
// forbidden (util/thread_role.h).
CallResult AwaitCall(Adapter& adapter, const CallRequest& req);
QueryResult AwaitQuery(Adapter& adapter, const std::string& service, const std::string& key,
                       const std::string& instance_id, uint64_t fencing_token, int attempt,
                       const TraceContext& trace);

}  // namespace sagad

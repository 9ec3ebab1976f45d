// HttpAdapter: the Adapter over HTTP/1.1, speaking the downstream protocol
// (docs/downstream-protocol.md): every call carries Idempotency-Key,
// Saga-Instance, Saga-Step, Saga-Fencing-Token, Saga-Attempt and the trace;
// what comes back is classified (classify.h). The exchanges run on an
// asynchronous client (http_client.h: event loops of its own or lent, a
// keep-alive pool per service, timeout_ms the deadline of the whole
// attempt): CallAsync and QueryAsync answer on a loop's thread (the
// caller's, when it runs one); Call and Query wait for them (never on a
// loop thread: that one might be the thread the answer needs).
// Thread-safety: safe for concurrent calls.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/adapter.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sagad {

class AsyncHttpClient;

class HttpAdapter : public Adapter {
 public:
  // `threads`: how many threads of its own run the client's event loops.
  explicit HttpAdapter(std::map<std::string, ServiceConfig> services, int threads = 2);
  // On `loops`, which the caller runs and stops before destroying the
  // adapter, with no call under way (sagad lends its shard loops:
  // AsioExecutor::Loops).
  HttpAdapter(std::map<std::string, ServiceConfig> services,
              std::vector<boost::asio::io_context*> loops);
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

}  // namespace sagad

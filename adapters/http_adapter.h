// HttpAdapter: the Adapter over HTTP/1.1 (cpp-httplib), speaking the
// downstream protocol (docs/downstream-protocol.md). Keeps a pool of keep-alive connections
// per service. Thread-safety: safe for concurrent Call/Query.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/adapter.h"

namespace sagad {

class DeadlineWatch;

class HttpAdapter : public Adapter {
 public:
  explicit HttpAdapter(std::map<std::string, ServiceConfig> services);
  ~HttpAdapter() override;

  // Adapter
  CallResult Call(const CallRequest& req) override;
  QueryResult Query(const std::string& service, const std::string& key,
                    const std::string& instance_id, uint64_t fencing_token, int attempt,
                    const TraceContext& trace) override;
  const ServiceConfig* Service(const std::string& name) const override;
  std::vector<std::string> ServiceNames() const override;

 private:
  struct Pool;
  std::map<std::string, ServiceConfig> services_;
  std::map<std::string, std::unique_ptr<Pool>> pools_;
  // timeout_ms is the deadline of a whole attempt (connect, send, the whole
  // reply): the watch stops a client whose attempt runs past it.
  std::unique_ptr<DeadlineWatch> watch_;
};

}  // namespace sagad

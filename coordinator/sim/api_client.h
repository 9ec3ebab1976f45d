// ApiClient: the simulated clients' side of sagad's HTTP API. A request goes
// to one process's ApiServer::Exchange: the router, the handlers,
// Submissions and Waiters are production's, only the socket is missing. Its
// answer comes whenever a continuation gives it (a commit's, a waiter's, a
// timer's), on whatever task that is; the client learns it in a task of
// its own right after. A process that dies closes its connections: what it
// had not answered ends as closed (status 0), which a client sends again.
//
// The invariant it checks: every request is answered, or its connection
// closed, within its own ?wait plus kAnswerSlackMs of simulated time (the
// keyed-wait hang once left requests unanswered forever).
// Thread-safety: none (the World's one thread).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/http/http_api.h"
#include "coordinator/sim/world.h"

namespace sagad::sim {

class ApiClient {
 public:
  // Beyond its ?wait, the longest a request may go unanswered: stalls the
  // seed's faults can cause (a pause of three leases, a slow store of two,
  // then a lost lease to take over) fit well inside it.
  static constexpr int64_t kAnswerSlackMs = 60'000;

  struct Answer {
    int status = 0;  // 0: the connection closed first (its process died)
    nlohmann::json body;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string Header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? "" : it->second;
    }
  };
  using Done = std::function<void(const Answer&)>;

  explicit ApiClient(World& world);

  // Sends `method target` with a JSON body (null: none) to process `p`.
  // `wait_s`: the ?wait the target asks for (0 if none).
  void Send(Process& p, const std::string& method, const std::string& target,
            std::vector<std::pair<std::string, std::string>> headers, const nlohmann::json& body,
            double wait_s, Done done);
  // Closes what dead processes held, and reports a request unanswered past
  // its bound. Runs every second of the seed, and at its end.
  void Check();
  size_t sent() const { return all_.size(); }

 private:
  struct Exchange {
    HttpRequest req;
    HttpResponse res;
    std::shared_ptr<Abandonment> gone = std::make_shared<Abandonment>();
    int proc = 0;
    uint64_t incarnation = 0;
    int64_t sent_at = 0;
    int64_t due = 0;  // answered or closed by then
    bool over = false;
    Done done;
  };
  // The response of `ex` is complete (from the process's task).
  void Completed(Exchange* ex);
  void End(Exchange* ex, const Answer& a);
  bool Closed(const Exchange& ex) const;
  void Tick();

  World& world_;
  std::vector<std::unique_ptr<Exchange>> all_;
};

}  // namespace sagad::sim

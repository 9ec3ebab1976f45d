#include "coordinator/sim/api_client.h"

#include <algorithm>
#include <cctype>

namespace sagad::sim {

ApiClient::ApiClient(World& world) : world_(world) {
  world_.At(world_.now() + 1000, [this] { Tick(); });
}

void ApiClient::Tick() {
  Check();
  world_.At(world_.now() + 1000, [this] { Tick(); });
}

void ApiClient::Send(Process& p, const std::string& method, const std::string& target,
                     std::vector<std::pair<std::string, std::string>> headers,
                     const nlohmann::json& body, double wait_s, Done done) {
  all_.push_back(std::make_unique<Exchange>());
  Exchange* ex = all_.back().get();
  ex->req.method = method;
  ex->req.target = target;
  ex->req.headers = std::move(headers);
  ex->req.remote_address = "127.0.0.1";
  if (!body.is_null()) {
    ex->req.body = body.dump();
    ex->req.headers.emplace_back("Content-Type", "application/json");
  }
  ex->proc = p.index;
  ex->incarnation = p.incarnation;
  ex->sent_at = world_.now();
  ex->due = world_.now() + static_cast<int64_t>(wait_s * 1000) + kAnswerSlackMs;
  ex->done = std::move(done);
  SIM_TRACE(world_, "client " + method + " " + target + " to " + std::to_string(p.index));
  // The request is read on the process: its handler runs as a task of it.
  world_.Schedule(world_.now(), p.index, p.incarnation, false, [this, ex] {
    Process& p = world_.processes()[static_cast<size_t>(ex->proc)];
    if (Closed(*ex) || !p.api) return;
    p.api->Exchange(ex->req, ex->res, ex->gone, [this, ex] { Completed(ex); });
  });
}

bool ApiClient::Closed(const Exchange& ex) const {
  const Process& p = world_.processes()[static_cast<size_t>(ex.proc)];
  return !p.alive || p.incarnation != ex.incarnation;
}

void ApiClient::Completed(Exchange* ex) {
  // The client reads it in a task of its own, after the one that gave it.
  world_.At(world_.now(), [this, ex] {
    if (ex->over) return;
    Answer a;
    if (!Closed(*ex)) {  // a dead process's answer never left it
      a.status = ex->res.status;
      for (const auto& [k, v] : ex->res.headers) {
        std::string name = k;
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        a.headers[name] = v;
      }
      a.body = nlohmann::json::parse(ex->res.body, nullptr, false);
    }
    End(ex, a);
  });
}

void ApiClient::End(Exchange* ex, const Answer& a) {
  ex->over = true;
  SIM_TRACE(world_, "client " + ex->req.method + " " + ex->req.target + ": " +
                        (a.status == 0 ? "connection closed" : std::to_string(a.status)));
  if (a.status != 0 && world_.now() > ex->due)
    world_.Violation(ex->req.method + " " + ex->req.target + " sent at " +
                     std::to_string(ex->sent_at - World::kEpochMs) + " ms was answered " +
                     std::to_string(world_.now() - ex->sent_at) + " ms later, past its bound");
  ex->done(a);
}

void ApiClient::Check() {
  // By index: a client told of a closed connection may send again.
  for (size_t i = 0; i < all_.size(); ++i) {
    Exchange* ex = all_[i].get();
    if (ex->over) continue;
    if (Closed(*ex)) {
      End(ex, Answer{});
    } else if (world_.now() > ex->due) {
      world_.Violation("no answer to " + ex->req.method + " " + ex->req.target + " sent at " +
                       std::to_string(ex->sent_at - World::kEpochMs) + " ms to process " +
                       std::to_string(ex->proc) + " after " +
                       std::to_string(world_.now() - ex->sent_at) +
                       " ms (a request must be answered or its connection closed)");
      return;
    }
  }
}

}  // namespace sagad::sim

// ExampleRoutes: the business of example-services (examples/example_services.cc),
// apart from the downstream protocol around it (keys, replays, queries,
// fencing, faults): tickets, hosts, accounts, IPs, messages, reservations,
// charges, shipments, flights, hotels and cars, each created, changed or
// undone by one POST. Thread-safety: none; the server calls it under its lock.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace sagad {

class ExampleRoutes {
 public:
  using json = nlohmann::json;
  // The answer (status, body) to a POST of `body` to `path`, with its effect
  // applied; *route names what it did ("create_ticket", "block_ip", ...; ""
  // for no such route, answered 404). A missing field is 422, an unknown
  // thing to undo 404.
  std::pair<int, json> Execute(const std::string& path, const json& body, std::string* route);

 private:
  long long seq_ = 0;  // numbers the refs of created things
  std::map<std::string, json> tickets_, messages_, reservations_, charges_, shipments_;
  std::map<std::string, json> flights_, hotels_, cars_;
  std::map<std::string, std::string> hosts_, accounts_, ips_;  // name -> state
};

}  // namespace sagad

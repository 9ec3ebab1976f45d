// ExampleRoutes: what each example service does with a business POST
// (examples/example_routes.h).
#include "examples/example_routes.h"

#include <regex>

namespace sagad {

auto ExampleRoutes::Execute(const std::string& path, const json& body, std::string* route)
    -> std::pair<int, json> {
  static const std::regex kClose(R"(/tickets/([^/]+)/close)");
  static const std::regex kRelease(R"(/reservations/([^/]+)/release)");
  static const std::regex kRefund(R"(/charges/([^/]+)/refund)");
  static const std::regex kCancel(R"(/shipments/([^/]+)/cancel)");
  static const std::regex kFlightCancel(R"(/flights/holds/([^/]+)/cancel)");
  static const std::regex kFlightIssue(R"(/flights/holds/([^/]+)/issue)");
  static const std::regex kHotelCancel(R"(/hotels/bookings/([^/]+)/cancel)");
  static const std::regex kCarCancel(R"(/cars/rentals/([^/]+)/cancel)");
  static const std::regex kRecall(R"(/messages/([^/]+)/recall)");
  auto need = [&](std::initializer_list<const char*> fields) -> std::string {
    for (const char* f : fields)
      if (!body.is_object() || !body.contains(f) || body[f].is_null()) return f;
    return "";
  };
  auto missing = [](const std::string& f) {
    return std::make_pair(422, json{{"error", "missing field '" + f + "'"}});
  };
  std::smatch m;
  auto create = [&](const char* kind, const char* prefix, std::initializer_list<const char*> f,
                    std::map<std::string, json>* table) -> std::pair<int, json> {
    *route = kind;
    std::string miss = need(f);
    if (!miss.empty()) return missing(miss);
    std::string ref = std::string(prefix) + std::to_string(++seq_);
    json obj = body;
    obj["ref"] = ref;
    obj["status"] = "active";
    (*table)[ref] = obj;
    return {201, obj};
  };
  auto undo = [&](const char* kind, std::map<std::string, json>* table,
                  const char* state) -> std::pair<int, json> {
    *route = kind;
    auto it = table->find(m[1].str());
    if (it == table->end()) return {404, json{{"error", "no such " + std::string(kind)}}};
    it->second["status"] = state;
    return {200, it->second};
  };
  if (path == "/tickets") {
    auto made = create("create_ticket", "T-", {"title", "severity"}, &tickets_);
    // What the ticket system knows of the source (an agent decides on it):
    // private ranges are internal, anything else external.
    if (made.first == 201 && body.contains("source_ip") && body["source_ip"].is_string()) {
      const std::string ip = body["source_ip"].get<std::string>();
      bool internal =
          ip.rfind("10.", 0) == 0 || ip.rfind("192.168.", 0) == 0 || ip.rfind("127.", 0) == 0;
      made.second["source"] = internal ? "internal" : "external";
      tickets_[made.second["ref"].get<std::string>()] = made.second;
    }
    return made;
  }
  // A thing put in one state or back (a host isolated or released, an
  // account disabled or restored, an IP blocked or unblocked): the same
  // answer for either path, so the undo is as idempotent as the forward.
  auto toggle = [&](const char* on_path, const char* on_route, const char* off_route,
                    const char* field, const char* prefix, const char* on_state,
                    const char* off_state,
                    std::map<std::string, std::string>* table) -> std::pair<int, json> {
    const bool on = path == on_path;
    *route = on ? on_route : off_route;
    std::string miss = need({field});
    if (!miss.empty()) return missing(miss);
    std::string v = body[field].is_string() ? body[field].get<std::string>() : body[field].dump();
    (*table)[v] = on ? on_state : off_state;
    return {200, json{{"ref", prefix + v}, {field, v}, {"status", (*table)[v]}}};
  };
  if (std::regex_match(path, m, kClose)) return undo("close_ticket", &tickets_, "closed");
  if (path == "/ips/block" || path == "/ips/unblock")
    return toggle("/ips/block", "block_ip", "unblock_ip", "ip", "ip-", "blocked", "unblocked",
                  &ips_);
  if (path == "/hosts/isolate" || path == "/hosts/release")
    return toggle("/hosts/isolate", "isolate_host", "release_host", "host", "host-", "isolated",
                  "released", &hosts_);
  if (path == "/accounts/disable" || path == "/accounts/restore")
    return toggle("/accounts/disable", "disable_account", "restore_account", "user", "acct-",
                  "disabled", "active", &accounts_);
  if (path == "/messages") return create("send_message", "M-", {"to", "body"}, &messages_);
  if (path == "/reservations")
    return create("reserve_inventory", "R-", {"sku", "qty"}, &reservations_);
  if (std::regex_match(path, m, kRelease))
    return undo("release_reservation", &reservations_, "released");
  if (path == "/charges")
    return create("charge_payment", "C-", {"amount", "currency", "customer"}, &charges_);
  if (std::regex_match(path, m, kRefund)) return undo("refund_charge", &charges_, "refunded");
  if (path == "/shipments") return create("create_shipment", "S-", {"address"}, &shipments_);
  if (std::regex_match(path, m, kCancel)) return undo("cancel_shipment", &shipments_, "cancelled");
  if (std::regex_match(path, m, kRecall)) return undo("recall_message", &messages_, "recalled");
  if (path == "/flights/holds")
    return create("reserve_flight", "F-", {"flight", "passenger"}, &flights_);
  if (std::regex_match(path, m, kFlightCancel))
    return undo("cancel_flight", &flights_, "cancelled");
  if (std::regex_match(path, m, kFlightIssue)) return undo("issue_tickets", &flights_, "ticketed");
  if (path == "/hotels/bookings")
    return create("reserve_hotel", "H-", {"hotel", "nights", "guest"}, &hotels_);
  if (std::regex_match(path, m, kHotelCancel)) return undo("cancel_hotel", &hotels_, "cancelled");
  if (path == "/cars/rentals")
    return create("reserve_car", "K-", {"pickup", "days", "driver"}, &cars_);
  if (std::regex_match(path, m, kCarCancel)) return undo("cancel_car", &cars_, "cancelled");
  *route = "";
  return {404, json{{"error", "no such route " + path}}};
}

}  // namespace sagad

// Fixture generator: writes a data dir in the record layout of schema
// version 0 (the first release): no index of unfinished instances, no leases,
// no outbox, meta schema_version 0, snapshots without schema_version,
// current_step or waiting_for. Used to test the explicit migration.
#pragma once

#include <string>
#include <vector>

namespace sagad::testing {

struct V0Fixture {
  std::string order_id;     // order_fulfilment, first step committed
  std::string incident_id;  // incident_response, waiting for approval
};

V0Fixture WriteV0DataDir(const std::string& dir);

}  // namespace sagad::testing

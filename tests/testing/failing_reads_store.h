// FailingReadsStore: the store a test gives it (a real one), except that the
// next `failures` reads of an instance (GetInstance) answer Unavailable, as
// while a database restarts. For the tests of what the engine's parts do
// when storage is away for a moment; everything else goes through unchanged.
#pragma once

#include <atomic>

#include "tests/testing/forwarding_store.h"

namespace sagad::testing {

class FailingReadsStore : public ForwardingStore {
 public:
  explicit FailingReadsStore(Store& real) : ForwardingStore(real) {}
  std::atomic<int> failures{0};  // reads still to refuse
  std::atomic<int> refused{0};   // reads refused so far

  StatusOr<nlohmann::json> GetInstance(const std::string& id) override {
    int left = failures.load();
    while (left > 0)
      if (failures.compare_exchange_weak(left, left - 1)) {
        ++refused;
        return Unavailable("the database is restarting (FailingReadsStore)");
      }
    return real_.GetInstance(id);
  }
};

}  // namespace sagad::testing

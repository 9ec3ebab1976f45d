// StoreFixture: a fresh LMDB store in a temp dir and a manual clock, for the
// unit tests of the engine's parts (a real store: no mock of what they rely on).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/subprocess.h"

namespace sagad::testing {

class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = LmdbStore::Open(dir_.path());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  // Ends the store's committer after its last continuations ran. A fixture
  // with executors calls it once they are shut down and before they are
  // destroyed: a continuation still running on the committer posts to them.
  void CloseStore() { store_.reset(); }

  TempDir dir_;
  std::unique_ptr<LmdbStore> store_;
  ManualClock clock_;
};

}  // namespace sagad::testing

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

  TempDir dir_;
  std::unique_ptr<LmdbStore> store_;
  ManualClock clock_;
};

}  // namespace sagad::testing

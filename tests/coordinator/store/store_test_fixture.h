// The fixture of the Store conformance suite (store_conformance_test.cc,
// store_async_commit_test.cc, store_listing_test.cc): a store of the backend the target is built
// for (SAGAD_STORE_BACKEND_*), a second handle on the same data, and small
// snapshots and events.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/memory/memory_store.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "tests/testing/postgres.h"
#include "tests/testing/subprocess.h"

namespace sagad {

inline int64_t Now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if SAGAD_STORE_BACKEND_POSTGRES
    uri_ = testing::PostgresServer::Shared().NewDatabase();
#endif
    store_ = Open();
    ASSERT_TRUE(store_);
  }
  // A handle on the same data; with PostgreSQL a second, independent one
  // (as another process would have), with LMDB one per process.
  StorePtr Open() {
#if SAGAD_STORE_BACKEND_POSTGRES
    auto s = PostgresStore::Open(uri_, 4);
#elif SAGAD_STORE_BACKEND_MEMORY
    StatusOr<StorePtr> s(StorePtr(new MemoryStore(memory_)));
#else
    auto s = LmdbStore::Open(dir_.path());
#endif
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? StorePtr(std::move(*s)) : nullptr;
  }
  SystemClock clock_;
  Store& Second() {
#if SAGAD_STORE_BACKEND_POSTGRES
    if (!second_) second_ = Open();
    return *second_;
#else
    return *store_;
#endif
  }
  nlohmann::json Snap(const std::string& id, uint64_t version,
                      const std::string& status = "RUNNING") {
    return {{"id", id}, {"version", version}, {"status", status}, {"saga", "s"}};
  }
  Event Ev(int64_t seq, const std::string& type) {
    Event e;
    e.seq = seq;
    e.type = type;
    return e;
  }

  testing::TempDir dir_;
  std::shared_ptr<MemoryData> memory_ = MemoryStore().data();
  std::string uri_;
  StorePtr store_, second_;
};

}  // namespace sagad

// MemoryStore: the Store contract (store.h) kept in memory, for the
// simulator (coordinator/sim/) and tests. Same answers as LmdbStore,
// checked by the store conformance suite (label unit); nothing is durable
// beyond the MemoryData it shares.
//
// Several MemoryStore handles may share one MemoryData: each is one
// process's view of the same database (SyncedCommits counts per handle).
// A commit is applied whole or not at all; "now" of a lease is read from
// the Clock passed in, inside the critical section, as LMDB does once it
// holds the writer lock.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <memory>

#include "coordinator/store/store.h"

namespace sagad {

struct MemoryData;  // defined in memory_store.cc

class MemoryStore final : public Store {
 public:
  // A new, empty database.
  MemoryStore();
  // Another handle on `data`.
  explicit MemoryStore(std::shared_ptr<MemoryData> data);
  ~MemoryStore() override;

  const std::shared_ptr<MemoryData>& data() const { return data_; }

  Status CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const Submission* submission, const std::vector<nlohmann::json>& outbox,
                        const Lease* lease,
                        const std::vector<OperationRecord>& operations = {}) override;
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override;
  StatusOr<Lease> AcquireLease(const std::string& id, const std::string& owner, const Clock& clock,
                               int64_t ttl_ms, const std::string& successor_of) override;
  StatusOr<std::map<std::string, Lease>> AcquireLeases(const std::vector<std::string>& ids,
                                                       const std::string& owner, const Clock& clock,
                                                       int64_t ttl_ms,
                                                       const std::string& successor_of) override;
  StatusOr<std::vector<std::string>> RenewLeases(const std::string& owner,
                                                 const std::vector<std::string>& ids,
                                                 const Clock& clock, int64_t ttl_ms) override;
  StatusOr<Lease> GetLease(const std::string& id) override;
  StatusOr<std::vector<OutboxRecord>> PeekOutbox(size_t max) override;
  Status AckOutbox(uint64_t seq) override;
  StatusOr<size_t> OutboxSize() override;
  StatusOr<nlohmann::json> GetInstance(const std::string& id) override;
  StatusOr<std::vector<Event>> GetEvents(const std::string& id) override;
  StatusOr<OperationRecord> GetOperation(const std::string& key) override;
  StatusOr<Submission> GetSubmission(const std::string& key) override;
  Status SetSubmissionResponse(const std::string& key, int status,
                               const nlohmann::json& response) override;
  StatusOr<InstancePage> ListInstances(const InstanceFilter& filter, size_t limit,
                                       const std::string& cursor) override;
  StatusOr<std::vector<ActiveInstance>> ListActive() override;
  uint64_t SyncedCommits() const override { return synced_; }
  StatusOr<std::vector<std::string>> DeleteFinished(int64_t finished_before_ms,
                                                    size_t max) override;
  StatusOr<std::vector<std::string>> PausedServices() override;
  Status SetServicePaused(const std::string& service, bool paused,
                          const nlohmann::json& note) override;
  StatusOr<nlohmann::json> PauseNotes() override;
  StatusOr<bool> PutDefinition(const std::string& name, int version,
                               const nlohmann::json& body) override;
  StatusOr<std::vector<StoredDefinition>> ListDefinitions() override;

 private:
  std::shared_ptr<MemoryData> data_;
  std::atomic<uint64_t> synced_{0};
};

}  // namespace sagad

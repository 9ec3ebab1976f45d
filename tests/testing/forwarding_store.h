// ForwardingStore: a Store that hands every call to a real one. Test
// doubles that change one behaviour of a real store (FailingReadsStore, a
// store whose lease transactions wait, ...) derive from it and override
// just that call.
#pragma once

#include "coordinator/store/store.h"

namespace sagad::testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& real) : real_(real) {}

  // Store
  Status CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const Submission* submission, const std::vector<nlohmann::json>& outbox,
                        const Lease* lease,
                        const std::vector<OperationRecord>& operations = {}) override {
    return real_.CreateInstance(snapshot, events, submission, outbox, lease, operations);
  }
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override {
    return real_.Commit(id, expected_version, snapshot, events, operations, outbox, lease);
  }
  StatusOr<Lease> AcquireLease(const std::string& id, const std::string& owner, const Clock& clock,
                               int64_t ttl_ms, const std::string& successor_of) override {
    return real_.AcquireLease(id, owner, clock, ttl_ms, successor_of);
  }
  StatusOr<std::map<std::string, Lease>> AcquireLeases(const std::vector<std::string>& ids,
                                                       const std::string& owner, const Clock& clock,
                                                       int64_t ttl_ms,
                                                       const std::string& successor_of) override {
    return real_.AcquireLeases(ids, owner, clock, ttl_ms, successor_of);
  }
  StatusOr<std::vector<std::string>> RenewLeases(const std::string& owner,
                                                 const std::vector<std::string>& ids,
                                                 const Clock& clock, int64_t ttl_ms) override {
    return real_.RenewLeases(owner, ids, clock, ttl_ms);
  }
  StatusOr<Lease> GetLease(const std::string& id) override { return real_.GetLease(id); }
  StatusOr<std::vector<OutboxRecord>> PeekOutbox(size_t max) override {
    return real_.PeekOutbox(max);
  }
  Status AckOutbox(uint64_t seq) override { return real_.AckOutbox(seq); }
  StatusOr<size_t> OutboxSize() override { return real_.OutboxSize(); }
  StatusOr<nlohmann::json> GetInstance(const std::string& id) override {
    return real_.GetInstance(id);
  }
  StatusOr<std::vector<Event>> GetEvents(const std::string& id) override {
    return real_.GetEvents(id);
  }
  StatusOr<OperationRecord> GetOperation(const std::string& key) override {
    return real_.GetOperation(key);
  }
  StatusOr<Submission> GetSubmission(const std::string& key) override {
    return real_.GetSubmission(key);
  }
  Status SetSubmissionResponse(const std::string& key, int status,
                               const nlohmann::json& response) override {
    return real_.SetSubmissionResponse(key, status, response);
  }
  void CommitAsync(std::shared_ptr<const TransitionWrite> w,
                   std::function<void(Status)> done) override {
    real_.CommitAsync(std::move(w), std::move(done));
  }
  void SetSubmissionResponseAsync(const std::string& key, int status,
                                  const nlohmann::json& response,
                                  std::function<void(Status)> done) override {
    real_.SetSubmissionResponseAsync(key, status, response, std::move(done));
  }
  StatusOr<InstancePage> ListInstances(const InstanceFilter& filter, size_t limit,
                                       const std::string& cursor) override {
    return real_.ListInstances(filter, limit, cursor);
  }
  StatusOr<std::vector<ActiveInstance>> ListActive() override { return real_.ListActive(); }
  uint64_t SyncedCommits() const override { return real_.SyncedCommits(); }
  StatusOr<std::vector<std::string>> DeleteFinished(int64_t finished_before_ms,
                                                    size_t max) override {
    return real_.DeleteFinished(finished_before_ms, max);
  }
  Status CheckWritable() override { return real_.CheckWritable(); }
  std::string StalePrimary() const override { return real_.StalePrimary(); }
  bool ReadsMayWait() const override { return real_.ReadsMayWait(); }
  StatusOr<std::vector<std::string>> PausedServices() override { return real_.PausedServices(); }
  Status SetServicePaused(const std::string& service, bool paused,
                          const nlohmann::json& note) override {
    return real_.SetServicePaused(service, paused, note);
  }
  StatusOr<nlohmann::json> PauseNotes() override { return real_.PauseNotes(); }
  StatusOr<bool> PutDefinition(const std::string& name, int version,
                               const nlohmann::json& body) override {
    return real_.PutDefinition(name, version, body);
  }
  StatusOr<std::vector<StoredDefinition>> ListDefinitions() override {
    return real_.ListDefinitions();
  }

 protected:
  Store& real_;
};

}  // namespace sagad::testing

// SimStore: one process's handle on the simulated database (a MemoryStore
// shared by every process), with the faults of a real one, drawn per write:
// a commit that fails and changes nothing, one that is applied and then
// reported failed (the ambiguous commit), one that takes long enough for a
// lease to run out meanwhile (the other processes run), and the process
// dying right before or right after a commit is applied. Lease times are
// judged by true time (the database's clock, as on PostgreSQL). As
// PostgreSQL does, a write holding a raw NUL in any string is refused
// (InvalidArgument), whatever the faults. A commit that makes an instance's
// log longer than World::kMaxLog events is reported as a runaway. The
// asynchronous writes complete later, from the process's committer.
// Once its process is dead every call fails with Unavailable.
// Thread-safety: none (the World's one thread).
#pragma once

#include "coordinator/store/memory/memory_store.h"

namespace sagad::sim {

class World;

struct StoreFaultRates {
  double fail = 0;        // Unavailable, nothing written
  double fail_after = 0;  // written, then Unavailable
  double slow = 0;        // the other processes run for up to two leases first
  double crash_before = 0;
  double crash_after = 0;
};

class SimStore final : public Store {
 public:
  SimStore(World& world, int proc);
  // The process died: its shared locks go with its connections.
  void Kill();
  // As the scenario draws it (Scenario::remote_reads).
  bool ReadsMayWait() const override;

  Status CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const Submission* submission, const std::vector<nlohmann::json>& outbox,
                        const Lease* lease,
                        const std::vector<OperationRecord>& operations = {}) override;
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override;
  // The asynchronous writes are the committer's, as in production: a task
  // of the process 0-2 ms after the caller's (whose task is over by then)
  // makes the write, faults drawn then, and runs `done` there, marked as
  // the committer's. A crash first loses the write (a process dies with the
  // batch it had queued); the teardown's drain completes it as failed.
  void CreateInstanceAsync(std::shared_ptr<const CreationWrite> w,
                           std::function<void(Status)> done) override;
  void CommitAsync(std::shared_ptr<const TransitionWrite> w,
                   std::function<void(Status)> done) override;
  void SetSubmissionResponseAsync(const std::string& key, int status,
                                  const nlohmann::json& response,
                                  std::function<void(Status)> done) override;
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
  uint64_t SyncedCommits() const override { return inner_.SyncedCommits(); }
  StatusOr<std::vector<std::string>> DeleteFinished(int64_t finished_before_ms,
                                                    size_t max) override;
  StatusOr<std::vector<std::string>> PausedServices() override;
  Status SetServicePaused(const std::string& service, bool paused,
                          const nlohmann::json& note) override;
  StatusOr<nlohmann::json> PauseNotes() override;
  StatusOr<bool> PutDefinition(const std::string& name, int version,
                               const nlohmann::json& body) override;
  StatusOr<std::vector<StoredDefinition>> ListDefinitions() override;
  // As PostgreSQL's advisory lock, but never waiting (one thread runs every
  // process): held by another process, it is Unavailable (the call is
  // answered 503 and sent again).
  StatusOr<std::function<void()>> LockShared(const std::string& name) override;

 private:
  // A write: `apply` runs unless a fault drawn here stops it first.
  Status Write(const char* what, const std::function<Status()>& apply);
  // CreateInstance and Commit, whoever calls them.
  Status Create(const nlohmann::json& snapshot, const std::vector<Event>& events,
                const Submission* submission, const std::vector<nlohmann::json>& outbox,
                const Lease* lease, const std::vector<OperationRecord>& operations);
  Status Transition(const std::string& id, uint64_t expected_version,
                    const nlohmann::json& snapshot, const std::vector<Event>& events,
                    const std::vector<OperationRecord>& operations,
                    const std::vector<nlohmann::json>& outbox, const Lease* lease);
  // Queues `write` as the committer's task (see CommitAsync).
  void Committer(std::function<void()> write);
  // A blocking write on a task whose thread must not block (a worker's, the
  // committer's: util/thread_role.h) is a violation: production aborts
  // there, and a committer that waits for a commit waits for itself.
  void CheckMayBlock(const char* what);
  Status Dead() const;

  // The database's clock: true time.
  class TrueClock final : public Clock {
   public:
    explicit TrueClock(const World& world) : world_(world) {}
    int64_t NowMillis() const override;
    std::chrono::steady_clock::time_point SteadyNow() const override;

   private:
    const World& world_;
  };

  World& world_;
  int proc_;
  bool dead_ = false;
  MemoryStore inner_;
  TrueClock true_clock_;
};

}  // namespace sagad::sim

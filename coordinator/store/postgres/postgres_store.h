// PostgresStore: the Store on a PostgreSQL database (libpq), shared by
// several sagad processes on several hosts.
//
// Tables (schema_version 1, created and migrated by Open under an advisory
// lock, so coordinators starting together do not race): sagad_meta,
// sagad_instances (id, saga, status, waiting, version, finished, snapshot;
// indexed for the listing filters and, partially, for unfinished
// instances), sagad_events (instance_id, seq), sagad_operations (key),
// sagad_submissions (key), sagad_leases (instance_id, owner, expires_at,
// generation) and sagad_outbox (seq, instance_id, message).
//
// Writes: new instances, transitions and submission responses queued while
// a commit is in flight are group-committed: one statement (the server-side
// function sagad_apply) applies the whole batch in one transaction, one
// round trip and one WAL flush. Inside it, each write first checks, under
// row locks, its lease (owner and generation: FOR SHARE, so a takeover
// waits for it) and then its compare-and-swap on the version; a refused
// write changes nothing and does not affect the others of the batch.
// Leases are judged by the database clock (clock_timestamp()), never by a
// host's: the clock arguments are ignored, and the expires_at handed back
// is translated to this host's wall clock for display and hints only.
// The outbox is published by one process at a time: the one that holds a
// session advisory lock on its outbox connection (released by the server
// when that process or its connection dies).
// Connections: a small fixed pool, opened lazily and re-opened after a
// failure; statement_timeout, lock_timeout and TCP keepalives bound every
// wait. A lost connection or an unreachable server is Unavailable (the
// engine retries; the API answers 503), never a crash.
// Thread-safety: safe for concurrent use.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/store/group_commit.h"
#include "coordinator/store/store.h"
#include "coordinator/store/store_fault.h"
#include "util/mutex.h"

namespace sagad {

class PgRows;  // a query's result rows (postgres_store.cc)

// True if `store` is a libpq connection URI (postgresql:// or postgres://).
bool IsPostgresUri(const std::string& store);
// The URI with its password (if any) replaced by "***": for logs and errors.
std::string RedactUri(const std::string& uri);

class PostgresStore : public Store {
 public:
  // Connects, creates or migrates the schema. FailedPrecondition if the
  // database holds a newer schema_version; Unavailable if it cannot be
  // reached. `pool_size` connections at most.
  static StatusOr<std::unique_ptr<PostgresStore>> Open(const std::string& uri,
                                                       size_t pool_size = 8);
  ~PostgresStore() override;

  // Store
  Status CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const Submission* submission, const std::vector<nlohmann::json>& outbox,
                        const Lease* lease,
                        const std::vector<OperationRecord>& operations = {}) override;
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override;
  void CommitAsync(std::shared_ptr<const TransitionWrite> w,
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
  std::chrono::milliseconds WritesStalled() const override { return group_.Stalled(); }
  void SetSubmissionResponseAsync(const std::string& key, int status,
                                  const nlohmann::json& response,
                                  std::function<void(Status)> done) override;
  StatusOr<InstancePage> ListInstances(const InstanceFilter& filter, size_t limit,
                                       const std::string& cursor) override;
  StatusOr<std::vector<ActiveInstance>> ListActive() override;
  uint64_t SyncedCommits() const override;
  StatusOr<std::vector<std::string>> DeleteFinished(int64_t finished_before_ms,
                                                    size_t max) override;
  StatusOr<std::vector<std::string>> PausedServices() override;
  Status SetServicePaused(const std::string& service, bool paused,
                          const nlohmann::json& note) override;
  StatusOr<nlohmann::json> PauseNotes() override;
  StatusOr<bool> PutDefinition(const std::string& name, int version,
                               const nlohmann::json& body) override;
  StatusOr<std::vector<StoredDefinition>> ListDefinitions() override;
  Status CheckWritable() override;

  class Connection;  // one libpq connection (postgres_store.cc)

 private:
  explicit PostgresStore(std::string uri, size_t pool_size);
  // A pooled connection, (re)connected; Unavailable if the server cannot be
  // reached. Give it back with Release.
  StatusOr<std::unique_ptr<Connection>> Acquire();
  void Release(std::unique_ptr<Connection> c);
  // One statement (a prepared one's name, or SQL) on a pooled connection.
  StatusOr<PgRows> Query(const char* statement, const std::vector<std::string>& params);
  // Runs one write (a JSON object for sagad_apply) through the group commit.
  Status Apply(nlohmann::json request);

  struct Pending : GroupCommit::Write {
    nlohmann::json request;
  };
  // The sagad_apply request of a transition (Commit, CommitAsync).
  static StatusOr<nlohmann::json> CommitRequest(const std::string& id, uint64_t expected_version,
                                                const SnapshotRecord& snapshot,
                                                const std::vector<Event>& events,
                                                const std::vector<OperationRecord>& operations,
                                                const std::vector<nlohmann::json>& outbox,
                                                const Lease* lease);
  // The group commit's Writer: one sagad_apply call for the batch.
  void ApplyBatch(const std::vector<GroupCommit::Write*>& batch);
  // Sends batch[from, to) as one sagad_apply call; its answers go to
  // (*answers)[from, to).
  Status RunApply(const std::vector<Pending*>& batch, size_t from, size_t to,
                  std::vector<std::string>* answers);
  // What sagad_apply's answer for `w` means.
  static Status AnswerOf(const Pending& w, const std::string& answer);

  std::string uri_;
  size_t pool_size_;
  Mutex pool_mu_;
  CondVar pool_cv_;
  std::vector<std::unique_ptr<Connection>> idle_ GUARDED_BY(pool_mu_);
  size_t open_ GUARDED_BY(pool_mu_) = 0;
  Mutex outbox_mu_;
  // Holds the publisher's advisory lock when outbox_locked_.
  std::unique_ptr<Connection> outbox_conn_ GUARDED_BY(outbox_mu_);
  bool outbox_locked_ GUARDED_BY(outbox_mu_) = false;
  std::atomic<uint64_t> synced_commits_{0};
  FaultWindow faults_;  // store faults, for CheckWritable
  // Last: it is stopped (what is queued written) before the pool goes.
  GroupCommit group_{[this](const std::vector<GroupCommit::Write*>& b) { ApplyBatch(b); }};
};

}  // namespace sagad

// PostgresStore: the Store on a PostgreSQL database (libpq), shared by
// several sagad processes on several hosts.
//
// Tables (schema_version 1, created and migrated by Open under an advisory
// lock, so coordinators starting together do not race): sagad_meta,
// sagad_instances (id, saga, status, waiting, version, finished, snapshot;
// indexed for the listing filters and, partially, for unfinished
// instances), sagad_events (instance_id, seq), sagad_operations (key),
// sagad_submissions (key), sagad_leases (instance_id, owner, expires_at,
// generation), sagad_outbox (seq, instance_id, message), and the declared
// search attributes: sagad_search_attributes (saga, name, complete) and
// sagad_attributes (name, value, instance_id).
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
// failure (with a backoff: 50 ms doubling up to 1 s while no server takes
// connections); statement_timeout, lock_timeout and TCP keepalives bound
// every wait. A lost connection or an unreachable server is Unavailable
// (the engine retries; the API answers 503), never a crash. The URI may
// name several hosts (libpq's postgresql://h1:p1,h2:p2/db): unless it says
// otherwise, target_session_attrs=read-write picks the primary among them,
// so after a failover the next connection finds the promoted standby.
// Commits whose outcome is unknown: every group commit carries a random
// batch id, recorded with its answers in the same transaction. If the
// connection breaks while a batch is committed, the store asks the database
// (on a new connection, whichever host is the primary by then) what became
// of that id, for up to readback_ms: committed, the writes' answers are the
// recorded ones; not committed, the id is recorded as dead first (so the
// batch can never land later) and the writes are Unavailable. If the
// database cannot be asked in time, the writes are Unavailable with the
// outcome unknown: the engine then reloads the instance from the store
// before it decides anything, and never re-sends the write as it was.
// Thread-safety: safe for concurrent use.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
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
  // reached. `pool_size` connections at most. `readback_ms`: how long a
  // write whose connection broke during its commit is read back for (see
  // "Commits whose outcome is unknown" above) before the store gives up.
  static StatusOr<std::unique_ptr<PostgresStore>> Open(const std::string& uri, size_t pool_size = 8,
                                                       int64_t readback_ms = 20000);
  ~PostgresStore() override;

  // Store
  Status CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const Submission* submission, const std::vector<nlohmann::json>& outbox,
                        const Lease* lease,
                        const std::vector<OperationRecord>& operations = {}) override;
  Status Commit(const std::string& id, uint64_t expected_version, const nlohmann::json& snapshot,
                const std::vector<Event>& events, const std::vector<OperationRecord>& operations,
                const std::vector<nlohmann::json>& outbox, const Lease* lease) override;
  void CreateInstanceAsync(std::shared_ptr<const CreationWrite> w,
                           std::function<void(Status)> done) override;
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
  // The statement ListInstances sends for a list and its parameters ($1...):
  // only the conditions in use, so that each filter gets its index (a test
  // EXPLAINs it).
  // `by_attribute`: the input (or metadata) field is a declared search
  // attribute complete in sagad_attributes for every saga that may match,
  // which then answers it (postgres_store_search.cc).
  static std::string ListStatement(const InstanceFilter& filter, size_t limit,
                                   const std::string& cursor, std::vector<std::string>* params,
                                   bool by_attribute = false);
  StatusOr<InstancePage> ListInstances(const InstanceFilter& filter, size_t limit,
                                       const std::string& cursor) override;
  StatusOr<std::vector<ActiveInstance>> ListActive() override;
  // Records the declaration at once (on the calling thread); the rows of the
  // instances stored before it are written by a thread of the store's, which
  // completes `done` (postgres_store_search.cc).
  void DeclareSearchAttributesAsync(const std::string& saga, const std::vector<std::string>& fields,
                                    std::function<void(Status)> done) override;
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
  std::string StalePrimary() const override;
  bool ReadsMayWait() const override { return true; }
  // A session advisory lock (pg_advisory_lock on the name's 64-bit hash) on
  // a connection of its own, outside the pool (a lock held while its
  // holder waits for a commit must not take the commit's connection); the
  // server releases it if the connection drops.
  StatusOr<std::function<void()>> LockShared(const std::string& name) override;

  class Connection;    // one libpq connection (postgres_connection.h)
  class PrimaryFence;  // never an old primary again (postgres_connection.h)

 private:
  PostgresStore(std::string uri, size_t pool_size, int64_t readback_ms);
  // A pooled connection, (re)connected; Unavailable if the server cannot be
  // reached. Give it back with Release.
  StatusOr<std::unique_ptr<Connection>> Acquire();
  // A new connection; after a failed one, none is tried for a while (50 ms,
  // doubling up to 1 s) and the last failure is the answer meanwhile.
  StatusOr<std::unique_ptr<Connection>> Connect();
  void Release(std::unique_ptr<Connection> c);
  // One statement (a prepared one's name, or SQL) on a pooled connection.
  // `sent` (if given) is set once a connection was had: from then on the
  // statement may have reached the server, whatever the answer.
  StatusOr<PgRows> Query(const char* statement, const std::vector<std::string>& params,
                         bool* sent = nullptr);
  // Runs one write (a JSON object for sagad_apply) through the group commit.
  Status Apply(nlohmann::json request);

  struct Pending : GroupCommit::Write {
    nlohmann::json request;
  };
  // The sagad_apply request of a new instance (CreateInstance, and Async).
  static nlohmann::json CreateRequest(const nlohmann::json& snapshot,
                                      const std::vector<Event>& events,
                                      const Submission* submission,
                                      const std::vector<nlohmann::json>& outbox, const Lease* lease,
                                      const std::vector<OperationRecord>& operations);
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
  // What became of batch `batch_id`, whose connection broke while it was
  // being committed (`why`): its answers (text[] text form) if it was
  // committed; Unavailable if it was not (and now never will be), or if
  // that could not be learnt within readback_ms_ (the outcome is unknown).
  StatusOr<std::string> ReadBack(const std::string& batch_id, const Status& why);
  // Sleeps `d` unless the store is closing; false if it is.
  bool Pause(std::chrono::milliseconds d);
  // Search attributes (postgres_store_search.cc). Declare records the
  // fields not yet declared and answers those not yet complete; Backfill
  // writes the rows of the instances stored before (in batches) and marks
  // `names` complete; AttributeComplete says whether sagad_attributes
  // answers `f`'s field search.
  StatusOr<std::vector<std::string>> Declare(const std::string& saga,
                                             const std::vector<std::string>& fields);
  Status Backfill(const std::string& saga, const std::vector<std::string>& names);
  StatusOr<bool> AttributeComplete(const InstanceFilter& f);
  void JoinBackfills();
  // A longer value is not indexed (sagad_put_attributes says the same).
  static constexpr size_t kMaxIndexedAttributeBytes = 1000;
  // What sagad_apply's answer for `w` means.
  static Status AnswerOf(const Pending& w, const std::string& answer);

  std::string uri_;
  const std::unique_ptr<PrimaryFence> fence_;
  size_t pool_size_;
  Mutex pool_mu_;
  CondVar pool_cv_;
  std::vector<std::unique_ptr<Connection>> idle_ GUARDED_BY(pool_mu_);
  size_t open_ GUARDED_BY(pool_mu_) = 0;
  // LockShared's connections not holding a lock now (a few kept).
  Mutex lock_conns_mu_;
  std::vector<std::unique_ptr<Connection>> lock_conns_ GUARDED_BY(lock_conns_mu_);
  Mutex outbox_mu_;
  // Holds the publisher's advisory lock when outbox_locked_.
  std::unique_ptr<Connection> outbox_conn_ GUARDED_BY(outbox_mu_);
  bool outbox_locked_ GUARDED_BY(outbox_mu_) = false;
  const int64_t readback_ms_;
  Mutex connect_mu_;
  std::chrono::steady_clock::time_point connect_again_at_ GUARDED_BY(connect_mu_);
  std::chrono::milliseconds connect_backoff_ GUARDED_BY(connect_mu_){0};
  Status connect_error_ GUARDED_BY(connect_mu_);
  // The server ("host:port") of the last connection lost: the next ones try
  // the URI's other hosts first.
  std::string suspect_ GUARDED_BY(connect_mu_);
  Mutex backfill_mu_;
  std::vector<std::thread> backfills_ GUARDED_BY(backfill_mu_);
  Mutex close_mu_;
  CondVar close_cv_;
  bool closing_ GUARDED_BY(close_mu_) = false;
  std::atomic<uint64_t> synced_commits_{0};
  uint64_t batches_ = 0;  // written by the group commit's leader only
  FaultWindow faults_;    // store faults, for CheckWritable
  // Last: it is stopped (what is queued written) before the pool goes.
  GroupCommit group_{[this](const std::vector<GroupCommit::Write*>& b) { ApplyBatch(b); }};
};

}  // namespace sagad

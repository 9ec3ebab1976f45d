// LmdbStore: the Store on one LMDB environment (a directory) with the named
// databases instances, events (id + seq), operations (by idempotency key),
// submissions (client Idempotency-Key), active (unfinished ids -> 8-byte
// version, saga, status), outbox (8-byte big-endian commit order -> message),
// leases (id -> owner, expiry, generation), sub_index (id -> submission
// key, for retention) and meta (schema_version).
// Every write is synced to disk before it returns (no MDB_NOSYNC).
// New instances, transitions and submission responses (CreateInstance,
// Commit, CommitAsync, SetSubmissionResponse) are group-committed: queued
// writes share one write transaction and one fsync, each done only once its
// own write is durable (or refused: a refused check changes nothing and does
// not affect the others of the batch). A blocking caller at the front of the
// queue writes the batch itself (leader/follower, as leveldb's
// DBImpl::Write), so a lone caller pays no thread switch; a batch whose front
// is a CommitAsync is written by the store's committer thread (GroupCommit,
// coordinator/store/group_commit.h).
// The compare-and-swap of a transition reads
// the version from `active` (8 bytes, not the snapshot); listing unfinished
// instances reads no snapshot (entries written before the index held more
// than the id fall back to it). Several processes may open the same dir.
// Records carry schema_version; Open migrates older layouts explicitly
// (0 -> 1) and refuses newer ones with a clear message.
// Thread-safety: safe for concurrent use (LMDB serialises writers).
#pragma once

#include <lmdb.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/store/group_commit.h"
#include "coordinator/store/store.h"
#include "util/mutex.h"

namespace sagad {

// 2: the listing's indexes (by_field, indexed): built from the snapshots
// when a data dir of schema 1 is opened.
constexpr int kStoreSchemaVersion = 2;
// A list examines at most this many stored instances per request (each a
// snapshot parsed): past it the page ends early, with a next_cursor. What
// an index answers (status, saga, waiting, owner) is examined only among
// the instances that have the indexed value.
constexpr size_t kMaxExaminedPerList = 5000;

class LmdbStore : public Store {
 public:
  // Opens (creating if needed) the environment in `dir`. FailedPrecondition
  // if the data was written by a newer schema version.
  static StatusOr<std::unique_ptr<LmdbStore>> Open(const std::string& dir,
                                                   size_t map_size_bytes = size_t(64) << 30);
  // Opens an existing environment for reading only (sagactl inspect, verify):
  // works on a read-only directory (without the lock file's protocol then,
  // so a writer running meanwhile may show a torn view).
  static StatusOr<std::unique_ptr<LmdbStore>> OpenReadOnly(const std::string& dir);
  ~LmdbStore() override;

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
  StatusOr<InstancePage> ListInstances(const InstanceFilter& filter, size_t limit,
                                       const std::string& cursor) override;
  StatusOr<std::vector<ActiveInstance>> ListActive() override;
  uint64_t SyncedCommits() const override;
  // Scans from the oldest instance up to the first created after the cutoff
  // (ids begin with their creation time), at most 100 x max per call;
  // unfinished ones are skipped by the index, their snapshots unread.
  StatusOr<std::vector<std::string>> DeleteFinished(int64_t finished_before_ms,
                                                    size_t max) override;
  // Unavailable from a write refused for lack of space (MDB_MAP_FULL,
  // ENOSPC) until a new instance is written again, or until a probe (a
  // 64 KiB record committed and deleted, at most once a second, from this
  // call) finds room: a transition that still fits says nothing about a
  // submission.
  StatusOr<std::vector<std::string>> PausedServices() override;
  Status SetServicePaused(const std::string& service, bool paused,
                          const nlohmann::json& note) override;
  // Queued in the group commit (one of its batches, its fsync shared).
  void SetServicePausedAsync(const std::string& service, bool paused, const nlohmann::json& note,
                             std::function<void(Status)> done) override;
  StatusOr<nlohmann::json> PauseNotes() override;
  StatusOr<bool> PutDefinition(const std::string& name, int version,
                               const nlohmann::json& body) override;
  void PutDefinitionAsync(const std::string& name, int version, const nlohmann::json& body,
                          std::function<void(StatusOr<bool>)> done) override;
  StatusOr<std::vector<StoredDefinition>> ListDefinitions() override;
  void DeclareSearchAttributesAsync(const std::string& saga, const std::vector<std::string>& fields,
                                    std::function<void(Status)> done) override;
  Status VerifyIndexes(std::vector<std::string>* problems) override;
  Status CheckWritable() override;

 private:
  LmdbStore() = default;
  Status PutSnapshot(MDB_txn* txn, const std::string& id, const SnapshotRecord& snapshot);
  Status AppendOutbox(MDB_txn* txn, const std::vector<std::string>& outbox);
  // Takes the lease of id in txn (see Store::AcquireLease).
  StatusOr<Lease> TakeLease(MDB_txn* txn, const std::string& id, const std::string& owner,
                            int64_t now_ms, int64_t ttl_ms, const std::string& successor_of);
  Status MigrateV0ToV1(MDB_txn* txn);
  // Schema 1 to 2: the listing's indexes of every stored snapshot.
  Status BuildIndexes(MDB_txn* txn);
  // Keeps the listing's indexes of `id` those of `snapshot` (null: none, it
  // is deleted): by_field holds code + value + NUL + id for its status (s),
  // saga (g), waiting_for (w) and owner (o); indexed, the keys it holds now.
  Status PutIndexes(MDB_txn* txn, const std::string& id, const SnapshotRecord* snapshot);
  // Declared search attributes (lmdb_store_search.cc): the fields declared
  // for `saga`; the index keys of a snapshot for `fields`; its entries put
  // (a new instance) or deleted (retention); a declaration with the entries
  // of the saga's stored instances; the prefix of the entries a filter's
  // input or metadata condition is answered from ("" when the index cannot
  // answer it completely: a saga that may match has not declared it).
  StatusOr<std::vector<std::string>> DeclaredAttributes(MDB_txn* txn, const std::string& saga);
  static std::vector<std::string> IndexKeys(const std::string& id, const SnapshotRecord& r);
  static std::vector<std::string> AttributeKeys(const std::string& id,
                                                const nlohmann::json& snapshot,
                                                const std::vector<std::string>& fields);
  Status PutAttributeKeys(MDB_txn* txn, const std::string& id, const nlohmann::json& snapshot,
                          bool put);
  Status Declare(MDB_txn* txn, const std::string& saga, const std::vector<std::string>& fields);
  StatusOr<std::string> AttributeIndexOf(MDB_txn* txn, const InstanceFilter& f);
  // The named databases and their handles.
  std::vector<std::pair<const char*, MDB_dbi*>> Databases();
  // Refuses a data.mdb shorter than its meta page says it is.
  Status CheckSize(const std::string& dir);
  // Whether 64 KiB can be committed now (see CheckWritable); Unavailable
  // without trying if the last probe was less than a second ago.
  enum class Probe { kRoom, kSkipped, kFull, kFailed };
  Probe ProbeRoom(Status* failure);  // *failure: why, unless kRoom
  // One record, in a read transaction of its own.
  StatusOr<nlohmann::json> ReadJson(MDB_dbi dbi, const std::string& key);

  // One queued write of the group commit: a new instance, a transition of an
  // existing one, or the response of a submission.
  // kOther: a write of the meta database (a pause, a deployed definition),
  // made by its own `check` and `apply`.
  enum class WriteKind { kCreate, kTransition, kSubmissionResponse, kOther };
  struct CommitRequest : GroupCommit::Write {
    CommitRequest(WriteKind k, const std::string& i, uint64_t ev, const SnapshotRecord* snap,
                  const std::vector<Event>* evs, const std::vector<OperationRecord>* ops,
                  const Submission* sub, const std::vector<nlohmann::json>* out, const Lease* l)
        : kind(k),
          id(i),
          expected_version(ev),
          snapshot(snap),
          events(evs),
          operations(ops),
          submission(sub),
          outbox(out),
          lease(l) {}
    WriteKind kind;
    const std::string& id;  // instance id (submission key)
    uint64_t expected_version;
    const SnapshotRecord* snapshot;  // creates and transitions (its text written as is)
    const std::vector<Event>* events;
    const std::vector<OperationRecord>* operations;  // transitions only
    const Submission* submission;  // creates (may be null); responses: key, status, response
    const std::vector<nlohmann::json>* outbox;
    const Lease* lease;
    // Creates: the snapshot as a tree (its input and metadata give the
    // entries of declared search attributes); null: none to write.
    const nlohmann::json* created = nullptr;
    nlohmann::json record;  // responses: the record to write, prepared by Check (null: none)
    // Creates and transitions: the records as they are written, serialised
    // by the writer's own thread before it queues (Prepare), so that the
    // batch's leader only checks and copies bytes while others wait.
    struct Texts {
      std::vector<std::pair<std::string, std::string>> events, operations;  // key, record
      std::vector<std::string> outbox;
    } texts;
    // CommitAsync, CreateInstanceAsync, SetSubmissionResponseAsync: what the
    // pointers above (and
    // `id`) point into.
    std::shared_ptr<const void> keep;
    // kOther: reads that may refuse it (its result), then its writes.
    std::function<Status(MDB_txn*)> check, apply;
  };
  // The writes of SetServicePaused and PutDefinition inside `txn` (blocking
  // or in a batch of the group commit). *fresh: the definition was new.
  Status ApplyPause(MDB_txn* txn, const std::string& service, bool paused,
                    const nlohmann::json& note);
  StatusOr<bool> NewDefinition(MDB_txn* txn, const std::string& name, int version,
                               const nlohmann::json& body);
  // A kOther write queued in the group commit; `done` gets its result.
  void QueueOther(std::function<Status(MDB_txn*)> check, std::function<Status(MDB_txn*)> apply,
                  std::function<void(Status)> done);
  StatusOr<InstancePage> ListByKey(const InstanceFilter& filter, const std::string& cursor);
  Status Check(MDB_txn* txn, CommitRequest& r);
  // Retention (DeleteFinished): up to `max` finished instances, and the
  // deletion of one instance's records.
  Status FindFinished(MDB_txn* txn, int64_t finished_before_ms, size_t max,
                      std::vector<std::pair<std::string, nlohmann::json>>* due);
  Status DeleteRecords(MDB_txn* txn, const std::string& id, const nlohmann::json& snap);
  // Prepares r and queues it for the committer, which completes `done`
  // (or completes it now, if r cannot be prepared).
  void QueueAsync(std::unique_ptr<CommitRequest> r, std::function<void(Status)> done);
  // Fills r.texts; a record that cannot be serialised refuses r alone.
  static Status Prepare(CommitRequest& r);
  Status Write(MDB_txn* txn, const CommitRequest& r);
  // The group commit's Writer: one LMDB transaction, one fsync.
  void WriteBatch(const std::vector<GroupCommit::Write*>& batch);
  StatusOr<uint64_t> StoredVersion(MDB_txn* txn, const std::string& id);
  StatusOr<ActiveInstance> IndexedState(MDB_txn* txn, const std::string& id, const MDB_val* entry);

  std::atomic<uint64_t> synced_commits_{0};
  std::atomic<bool> full_{false};
  std::atomic<int64_t> last_probe_ms_{INT64_MIN / 2};  // steady clock, see ProbeRoom
  // Creates, transitions and submission responses (lmdb_group_commit.cc).
  GroupCommit group_{[this](const std::vector<GroupCommit::Write*>& b) { WriteBatch(b); }};

  MDB_env* env_ = nullptr;
  MDB_dbi instances_ = 0, events_ = 0, operations_ = 0, submissions_ = 0, active_ = 0, meta_ = 0,
          outbox_ = 0, leases_ = 0,
          sub_index_ = 0,  // instance id -> its submission key (for retention)
      by_field_ = 0,       // code value NUL id -> "" (PutIndexes)
      indexed_ = 0;        // instance id -> the by_field keys it holds (JSON)
};

}  // namespace sagad

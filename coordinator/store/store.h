// Store: durable state of the coordinator. Every transition of an instance is
// one atomic, durable write (snapshot + events + operation records) guarded by
// a compare-and-swap on the instance's record version.
//
// Records are JSON documents; the instance snapshot is Instance::ToJson().
// Thread-safety: implementations are safe for concurrent use.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sagas/instance.h"
#include "util/clock.h"
#include "util/status.h"

namespace sagad {

// One logical downstream operation, by idempotency key.
struct OperationRecord {
  std::string key;
  std::string instance_id;
  std::string step;
  std::string kind;       // "forward" | "compensation"
  std::string args_hash;  // SHA-256 of the canonical body the key is bound to
  std::string state;      // STARTED, COMMITTED, FAILED, UNKNOWN, ...
  int attempts = 0;
  std::string external_ref;
  nlohmann::json result;
  std::string last_error;
  int64_t created_at = 0;
  int64_t updated_at = 0;

  nlohmann::json ToJson() const;
  static OperationRecord FromJson(const nlohmann::json& j);
};

// A client submission by its Idempotency-Key header.
struct Submission {
  std::string key;
  std::string request_hash;  // SHA-256 of saga name + canonical body
  std::string instance_id;
  int response_status = 0;  // 0 until the first response was produced
  nlohmann::json response;  // the body that was sent
  int64_t created_at = 0;

  nlohmann::json ToJson() const;
  static Submission FromJson(const nlohmann::json& j);
};

// Optional filters of a listing; empty fields match everything.
struct InstanceFilter {
  InstanceFilter() = default;
  InstanceFilter(std::string status_, std::string saga_, std::string waiting_)
      : status(std::move(status_)), saga(std::move(saga_)), waiting(std::move(waiting_)) {}

  std::string status;   // saga status
  std::string saga;     // saga name
  std::string waiting;  // approval | retry | review (the view's waiting_for)
  // The instance a client's Idempotency-Key created (at most one).
  std::string idempotency_key;
  // A top-level input field equal to `input_value` (a string field's value,
  // or the JSON text of a number, boolean or null); with `in_metadata`, a
  // field of a run's metadata (agent, model...) instead.
  std::string input_field, input_value;
  bool in_metadata = false;
  // The principal that created it (the snapshot's "owner"); empty: any.
  std::string owner;
  // Created strictly after / strictly before these wall times (ms since the
  // epoch, as the id carries it: its first 12 hex digits); 0: no bound.
  int64_t created_after = 0, created_before = 0;
};

// The smallest instance id created at `ms` or later, and the creation time
// an id carries (0 if it is not an instance id): the creation-time bounds
// of a list are ranges of ids (ids sort by creation).
std::string IdFloor(int64_t ms);
int64_t CreatedAtOfId(const std::string& id);
// Whether `id` lies within the filter's creation-time bounds.
bool WithinCreated(const InstanceFilter& filter, const std::string& id);

// A saga definition deployed over the API (Store::PutDefinition).
struct StoredDefinition {
  std::string name;
  int version = 0;
  nlohmann::json body;
};

// Whether `snapshot` passes the status, saga, waiting, owner and input parts of
// `filter` (both stores' scans, and the Idempotency-Key lookup).
bool Matches(const InstanceFilter& filter, const nlohmann::json& snapshot);
// The text an input or metadata field is searched by (`input_value`): a
// string's value, or the JSON text of a number, boolean or null; false for
// an object or an array (never matched).
bool SearchText(const nlohmann::json& value, std::string* text);

// What every store answers for an id it does not hold (and what the API
// answers for an instance its caller may not see: the same words).
Status InstanceNotFound(const std::string& id);

// Ownership of an instance by one coordinator process. The generation grows
// each time the instance changes hands; it is the downstream fencing token.
struct Lease {
  std::string owner;
  int64_t expires_at = 0;  // wall ms; past it another process may take over
  uint64_t generation = 0;

  nlohmann::json ToJson() const;
  static Lease FromJson(const nlohmann::json& j);
};

// A record of the transactional outbox, waiting to be published.
struct OutboxRecord {
  uint64_t seq = 0;        // commit order
  nlohmann::json message;  // what is published
};

struct InstancePage {
  std::vector<nlohmann::json> instances;  // snapshots, newest first
  std::string next_cursor;                // empty when there is no more
  // False when a condition was checked on each stored instance in turn (a
  // bounded scan: a short or empty page with a cursor may still have more).
  bool indexed = true;
};

// An instance's snapshot as a store writes it: the JSON text, and the
// fields a store reads of it (its index, the version check, the lease's
// release on a terminal status), so that it is neither built as a tree nor
// parsed on the way.
struct SnapshotRecord {
  std::string text;
  std::string id, saga, status;
  nlohmann::json waiting_for;  // a string, or null
  std::string owner;           // the principal that created it ("" before owners)
  uint64_t version = 0;
  int64_t updated_at = 0;

  // From the snapshot's JSON (what Commit and CreateInstance take).
  static SnapshotRecord FromJson(const nlohmann::json& snapshot);
  // From the instance itself (Instance::SnapshotText: only what changed
  // since the copy it came from is serialised again).
  static SnapshotRecord FromInstance(Instance& inst);
  // The JSON again, parsed (for a store that keeps trees).
  nlohmann::json Parse() const;
};

// One transition as CommitAsync takes it (what Commit's arguments say),
// owned: it lives until the commit is done.
struct TransitionWrite {
  std::string id;
  uint64_t expected_version = 0;
  SnapshotRecord snapshot;
  std::vector<Event> events;
  std::vector<OperationRecord> operations;
  std::vector<nlohmann::json> outbox;
  std::optional<Lease> fence;  // Commit's `lease`
};

// One new instance as CreateInstanceAsync takes it (what CreateInstance's
// arguments say), owned: it lives until the write is done.
struct CreationWrite {
  nlohmann::json snapshot;
  std::vector<Event> events;
  std::optional<Submission> submission;
  std::vector<nlohmann::json> outbox;
  std::optional<Lease> lease;
  std::vector<OperationRecord> operations;
};

// One entry of the index of unfinished instances.
struct ActiveInstance {
  std::string id;
  std::string saga;
  std::string status;
  uint64_t version = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // Creates an instance: snapshot (version 1) and its first events, the
  // submission record if `submission` is set, `outbox` records and the
  // operation records of its first events (a first step's STARTED may ride
  // in the creation), in one durable transaction. AlreadyExists if the id or
  // the submission key exists. `lease` (if set) is written as the
  // instance's first lease.
  virtual Status CreateInstance(const nlohmann::json& snapshot, const std::vector<Event>& events,
                                const Submission* submission,
                                const std::vector<nlohmann::json>& outbox, const Lease* lease,
                                const std::vector<OperationRecord>& operations = {}) = 0;

  // CreateInstance, completing `done` instead of blocking its caller (as
  // CommitAsync: on a thread of the store's, or inside this call in a store
  // that writes synchronously, this default). `done` must not block.
  virtual void CreateInstanceAsync(std::shared_ptr<const CreationWrite> w,
                                   std::function<void(Status)> done) {
    done(CreateInstance(w->snapshot, w->events, w->submission ? &*w->submission : nullptr,
                        w->outbox, w->lease ? &*w->lease : nullptr, w->operations));
  }

  // Commits one transition: snapshot, events, operation records and outbox
  // records (appended in order), atomically. Aborted if the stored
  // version is not `expected_version` (someone else committed first). The
  // snapshot's "version" must be expected_version + 1. With `lease` set, the
  // stored lease must still have that owner and generation (fencing: a
  // paused old owner cannot commit), else LeaseLost("lease lost: ...").
  // A terminal snapshot releases the lease.
  virtual Status Commit(const std::string& id, uint64_t expected_version,
                        const nlohmann::json& snapshot, const std::vector<Event>& events,
                        const std::vector<OperationRecord>& operations,
                        const std::vector<nlohmann::json>& outbox, const Lease* lease) = 0;

  // Commit, completing a continuation instead of blocking its caller:
  // `done` gets what Commit would return, once the write is durable (or
  // refused). It runs on a thread of the store's, or inside CommitAsync in
  // a store that commits synchronously (this default: Commit, then done;
  // a test double that overrides only Commit keeps its behaviour). `done`
  // must not block: it hands its work on (an executor's Post).
  virtual void CommitAsync(std::shared_ptr<const TransitionWrite> w,
                           std::function<void(Status)> done) {
    done(Commit(w->id, w->expected_version, w->snapshot.Parse(), w->events, w->operations,
                w->outbox, w->fence ? &*w->fence : nullptr));
  }

  // Takes or renews the lease of `id` for `owner` until now + ttl: allowed
  // if there is none, it expired, or `owner` holds it; the generation grows
  // when the owner changes. LeaseLost if another owner holds it,
  // unless that owner's name starts with `successor_of` (non-empty): a
  // restarted process takes its dead predecessor's leases at once.
  // "now" is read inside the transaction that grants the lease, never
  // before it: from `clock` once the writer lock is held (LMDB), from the
  // database clock (PostgreSQL). A lease computed from a time read before a
  // wait for the lock would be born expired, and another process could take
  // it while its holder still believes it is valid.
  virtual StatusOr<Lease> AcquireLease(const std::string& id, const std::string& owner,
                                       const Clock& clock, int64_t ttl_ms,
                                       const std::string& successor_of) = 0;
  // The same for many ids in one transaction (recovery): the leases taken;
  // an id held by another live owner is left out.
  virtual StatusOr<std::map<std::string, Lease>> AcquireLeases(const std::vector<std::string>& ids,
                                                               const std::string& owner,
                                                               const Clock& clock, int64_t ttl_ms,
                                                               const std::string& successor_of) = 0;
  // Renews every lease of `ids` that `owner` still holds, in one
  // transaction (now read inside it, as above); returns the ids it no
  // longer holds.
  virtual StatusOr<std::vector<std::string>> RenewLeases(const std::string& owner,
                                                         const std::vector<std::string>& ids,
                                                         const Clock& clock, int64_t ttl_ms) = 0;
  // NotFound if the instance has no lease (finished, or never owned).
  virtual StatusOr<Lease> GetLease(const std::string& id) = 0;

  // The oldest `max` outbox records, in commit order.
  virtual StatusOr<std::vector<OutboxRecord>> PeekOutbox(size_t max) = 0;
  // Removes a delivered record.
  virtual Status AckOutbox(uint64_t seq) = 0;
  virtual StatusOr<size_t> OutboxSize() = 0;

  // NotFound if absent.
  virtual StatusOr<nlohmann::json> GetInstance(const std::string& id) = 0;
  virtual StatusOr<std::vector<Event>> GetEvents(const std::string& id) = 0;
  virtual StatusOr<OperationRecord> GetOperation(const std::string& key) = 0;
  virtual StatusOr<Submission> GetSubmission(const std::string& key) = 0;
  // Records the response given for a submission key (for replays).
  virtual Status SetSubmissionResponse(const std::string& key, int status,
                                       const nlohmann::json& response) = 0;
  // SetSubmissionResponse, completing `done` instead of blocking its caller
  // (as CommitAsync: on a thread of the store's, or inside this call in a
  // store that writes synchronously, this default). `done` must not block.
  virtual void SetSubmissionResponseAsync(const std::string& key, int status,
                                          const nlohmann::json& response,
                                          std::function<void(Status)> done) {
    done(SetSubmissionResponse(key, status, response));
  }

  // Every instance of `saga` (a saga's or a toolbox's name) is indexed
  // from now on by `fields` (sagas/search_attributes.h: input fields, or
  // "metadata.F" of a run's metadata), and so are those stored already:
  // a store that indexes declared attributes writes the entries of the
  // saga's stored instances (LMDB: in the transaction that records the
  // declaration; PostgreSQL: in a background pass after it), so a list
  // answered from the index is never incomplete; until then such a list is
  // answered as an undeclared field's. Idempotent; declarations only grow.
  // `done` as CommitAsync's. Default: nothing to do (memory scans).
  virtual void DeclareSearchAttributesAsync(const std::string& saga,
                                            const std::vector<std::string>& fields,
                                            std::function<void(Status)> done) {
    (void)saga;
    (void)fields;
    done(Status::Ok());
  }

  // Checks the listing's indexes against the snapshots (sagactl verify):
  // every entry an instance should have is there, and every entry names a
  // stored instance that should have it; each difference is appended to
  // `problems`. A store without indexes of its own has nothing to check.
  virtual Status VerifyIndexes(std::vector<std::string>* problems) {
    (void)problems;
    return Status::Ok();
  }

  // Newest first. `cursor` is the next_cursor of the previous page.
  virtual StatusOr<InstancePage> ListInstances(const InstanceFilter& filter, size_t limit,
                                               const std::string& cursor) = 0;
  // Instances that are not COMPLETED or COMPENSATED, from a small index
  // (no snapshot is read): id, saga, status and version as last committed.
  virtual StatusOr<std::vector<ActiveInstance>> ListActive() = 0;
  // Durable write transactions committed by this process so far (each one
  // sync of the storage; group commit makes them fewer than transitions).
  virtual uint64_t SyncedCommits() const = 0;
  // Retention: deletes up to `max` finished instances (COMPLETED,
  // COMPENSATED) whose snapshot's updated_at is before `finished_before_ms`,
  // with their events, operation records, submission keys and lease, in one
  // short write transaction. Returns the ids deleted (fewer than `max`:
  // nothing more is due right now, or the scan of this call ended).
  virtual StatusOr<std::vector<std::string>> DeleteFinished(int64_t finished_before_ms,
                                                            size_t max) = 0;
  // Ok if a write could be committed now (the database is reachable and
  // not read-only); Unavailable otherwise. /readyz answers 503 meanwhile.
  virtual Status CheckWritable() { return Status::Ok(); }
  // A lock named `name` shared by every coordinator of this store, held
  // until the returned function is called (once, from any thread): what
  // must be read and committed by one coordinator at a time (a toolbox's
  // guard per principal). Blocks until it is had; Unavailable when it
  // cannot be within a few seconds. The default, for a store only one
  // process opens, holds nothing (the caller serialises its own threads).
  virtual StatusOr<std::function<void()>> LockShared(const std::string& name) {
    (void)name;
    return std::function<void()>([] {});
  }
  // Why the store refuses the database server it found (an old primary
  // that came back after a promotion), while it does; "" otherwise (and
  // for stores with a single server).
  virtual std::string StalePrimary() const { return ""; }
  // Whether a read may wait for a server (a database over the network, up
  // to its statement deadline) rather than touch memory or a local file:
  // the engine then makes its owners' reads ahead of time, on threads that
  // may wait (Driver::Schedule). Default: no (LMDB, memory).
  virtual bool ReadsMayWait() const { return false; }
  // How long writes have been queued with none finished (0: none queued,
  // or the last batch just ended): the watchdog's measure of a stalled
  // store. Takes no lock held across a write.
  virtual std::chrono::milliseconds WritesStalled() const { return std::chrono::milliseconds(0); }

  // The downstream services an operator paused (new sends held), sorted;
  // durable, and shared by every coordinator of the store.
  virtual StatusOr<std::vector<std::string>> PausedServices() = 0;
  // Pauses or resumes `service`, durably (idempotent). A pause keeps
  // `note` (who paused it, why, since when: {"by", "reason", "since"});
  // pausing a paused service keeps its first note; a resume drops it.
  virtual Status SetServicePaused(const std::string& service, bool paused,
                                  const nlohmann::json& note) = 0;
  // SetServicePaused, completing `done` instead of blocking its caller (as
  // CommitAsync: on a thread of the store's, or inside this call in a store
  // that writes synchronously, this default). `done` must not block.
  virtual void SetServicePausedAsync(const std::string& service, bool paused,
                                     const nlohmann::json& note, std::function<void(Status)> done) {
    done(SetServicePaused(service, paused, note));
  }
  // The notes of the paused services, {"service": note}; a service paused
  // by an older sagad has none.
  virtual StatusOr<nlohmann::json> PauseNotes() = 0;

  // Saga definitions deployed over the API, immutable per version: true if
  // stored now, false if the same body was there already, AlreadyExists if
  // another body holds that name and version. `body` is compared as is
  // (callers store a canonical form).
  virtual StatusOr<bool> PutDefinition(const std::string& name, int version,
                                       const nlohmann::json& body) = 0;
  // PutDefinition, completing `done` instead of blocking its caller (as
  // SetServicePausedAsync).
  virtual void PutDefinitionAsync(const std::string& name, int version, const nlohmann::json& body,
                                  std::function<void(StatusOr<bool>)> done) {
    done(PutDefinition(name, version, body));
  }
  // Every deployed definition, by name then version.
  virtual StatusOr<std::vector<StoredDefinition>> ListDefinitions() = 0;
};

using StorePtr = std::unique_ptr<Store>;

}  // namespace sagad

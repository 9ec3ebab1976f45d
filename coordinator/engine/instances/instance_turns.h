// InstanceTurns: one turn at a time per instance id, given in the order it
// was asked for, to blocking and asynchronous takers alike. The repository
// holds an instance's turn from loading it for a transition until that
// transition's commit is done (and its `committed` hook ran), so the
// transitions of one instance never interleave, even when a commit
// completes a continuation instead of blocking its caller.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "coordinator/engine/callbacks.h"
#include "util/mutex.h"

namespace sagad {

class InstanceTurns {
 public:
  // Blocks until the caller has the turn of `id`.
  void Take(const std::string& id);
  // Takes the turn of `id` if nobody holds it; never waits.
  bool TryTake(const std::string& id);
  // Runs `run` once the caller has the turn: inside TakeAsync when nobody
  // holds it, else inside the End that hands it over. `run` (or what it
  // starts) must End the turn.
  void TakeAsync(const std::string& id, Task run);
  // Ends the turn of `id`; the next taker, if any, has it.
  void End(const std::string& id);
  // How many wait for the turn of `id` (for tests).
  size_t Waiting(const std::string& id);

  // The turn of `id` for a scope (Take, then End).
  class Held {
   public:
    Held(InstanceTurns& turns, const std::string& id) : turns_(turns), id_(id) { turns_.Take(id_); }
    ~Held() { turns_.End(id_); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    InstanceTurns& turns_;
    const std::string id_;
  };

 private:
  struct Taker {
    Task run;                     // asynchronous taker
    std::shared_ptr<bool> go;     // blocking taker: set when it has the turn
    std::shared_ptr<CondVar> cv;  // ... and signalled then
  };
  // Sharded by id so that unrelated instances rarely meet on one mutex.
  struct Shard {
    Mutex mu;
    // Present: the turn is held; the deque holds those waiting for it.
    std::unordered_map<std::string, std::deque<Taker>> held GUARDED_BY(mu);
  };
  static constexpr size_t kShards = 64;
  Shard& ShardOf(const std::string& id) { return shards_[std::hash<std::string>()(id) % kShards]; }
  Shard shards_[kShards];
};

}  // namespace sagad

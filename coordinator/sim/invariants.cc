#include "coordinator/sim/invariants.h"

#include <map>

#include "coordinator/sim/agents.h"
#include "policies/planner.h"
#include "sagas/event_types.h"
#include "sagas/settled.h"
#include "sagas/step_key.h"

namespace sagad::sim {
namespace {

struct Undo {
  size_t order = 0;  // position in the effects log
  bool done = false;
};

std::string Where(const std::string& id, const StepState& st) {
  return "instance " + id + " step " + st.name + " (" + StepStatusName(st.status()) + ")";
}

// Ground truth of one step against what the instance recorded.
std::string CheckStep(World& w, const std::string& id, const SagaDefinition& def,
                      const Instance& inst, size_t i) {
  const StepState& st = inst.step(i);
  const StepDefinition& sd = def.steps[i];
  const Operation* fwd = w.downstreams().Find(StepKey(id, st.name));
  const Operation* comp = w.downstreams().Find(CompensationKey(id, st.name));
  const bool happened = fwd && fwd->effects > 0;
  const bool undone = comp && comp->effects > 0;
  const bool operator_said = !st.resolution.is_null();
  const StepStatus s = st.status();
  if (s == StepStatus::kCommitted && !happened && !operator_said)
    return Where(id, st) + " is COMMITTED but its service has no effect of it";
  if (happened && w.MeantGated(def.name, st.name) && !st.machine.approved())
    return Where(id, st) + " took effect without the approval its author asked for";
  if (happened && def.run && sd.requires_approval && !st.machine.approved() && !operator_said)
    return Where(id, st) + ": a call that waits for an operator took effect unapproved";
  // What an operator approved is exactly what was sent.
  if (happened && st.approval.is_object() && st.approval.value("decision", "") == "approved" &&
      st.approval.contains("args_hash") && st.approval["args_hash"] != fwd->request_hash)
    return Where(id, st) + " sent another request than the one approved";
  if ((s == StepStatus::kPlanned || s == StepStatus::kFailed || s == StepStatus::kRejected) &&
      happened)
    return Where(id, st) + " is recorded as never done but its service applied it";
  if (s == StepStatus::kCompensated && happened && sd.compensation && !undone && !operator_said)
    return Where(id, st) + " is COMPENSATED but its undo never took effect";
  const SagaStatus ss = inst.status();
  if (ss == SagaStatus::kCompensated && happened && sd.irreversible)
    return "instance " + id + " is COMPENSATED with irreversible step " + st.name + " done";
  if (ss == SagaStatus::kCompensated && happened && sd.compensation && !undone && !operator_said)
    return "instance " + id + " is COMPENSATED but step " + st.name + " was never undone";
  // A finished run may hold calls that failed or were refused: never sent.
  if (ss == SagaStatus::kCompleted && !happened && !operator_said &&
      (!def.run || s == StepStatus::kCommitted))
    return "instance " + id + " is COMPLETED without the effect of step " + st.name;
  return "";
}

// Undo in dependency order, from the effects log.
std::string CheckUndoOrder(World& w, const std::string& id, const Instance& inst) {
  std::map<std::string, Undo> undo;
  const auto& log = w.downstreams().effects();
  for (size_t k = 0; k < log.size(); ++k)
    if (log[k].instance == id && log[k].compensation) undo[log[k].step] = Undo{k, true};
  for (size_t a = 0; a < inst.steps().size(); ++a) {
    auto ua = undo.find(inst.step(a).name);
    if (ua == undo.end()) continue;
    for (size_t b = 0; b < inst.steps().size(); ++b) {
      if (a == b || !inst.IsAncestor(static_cast<int>(a), static_cast<int>(b))) continue;
      const std::string& later = inst.step(b).name;
      const Operation* fwd = w.downstreams().Find(StepKey(id, later));
      if (!fwd || fwd->effects == 0) continue;
      auto ub = undo.find(later);
      if (ub != undo.end() && ub->second.order > ua->second.order)
        return "instance " + id + ": " + inst.step(a).name + " undone before " + later +
               ", which depends on it";
    }
  }
  return "";
}

// A re-send deferred by an empty retry budget reserves its token: it is
// written once, then sent (never deferred again before something happens to
// its step).
std::string CheckDeferrals(const std::string& id, const std::vector<Event>& events) {
  std::map<std::string, std::string> last;  // step -> type of its last event
  for (const Event& e : events) {
    if (e.step.empty()) continue;
    std::string& before = last[e.step];
    const char* deferred = StepNoteName(StepNote::kRetryDeferred);
    if (e.type == deferred && before == deferred)
      return "instance " + id + " step " + e.step + ": a re-send deferred twice in a row (seq " +
             std::to_string(e.seq) + ")";
    before = e.type;
  }
  return "";
}

std::string CheckInstance(World& w, MemoryStore& store, const std::string& id,
                          const nlohmann::json& snap) {
  auto events = store.GetEvents(id);
  if (!events.ok()) return "instance " + id + ": events unreadable";
  if (std::string v = CheckDeferrals(id, *events); !v.empty()) return v;
  auto inst = Instance::Replay(id, *events);
  if (!inst.ok()) return "instance " + id + ": the log does not replay: " + inst.status().message();
  inst->set_version(snap.value("version", uint64_t(0)));
  if (inst->ToJson() != snap) return "instance " + id + ": snapshot differs from the replayed log";
  SagaStatus ss = inst->status();
  if (ss != SagaStatus::kCompleted && ss != SagaStatus::kCompensated &&
      ss != SagaStatus::kNeedsReview) {
    std::string steps = " plan:";
    for (const SagaDefinition& d : w.sagas())
      if (d.name == inst->saga())
        for (const Action& a : NextActions(d, *inst))
          steps += " " + std::string(ActionKindName(a.kind)) + "(" + std::to_string(a.step) + ")";
    for (const auto& st : inst->steps())
      steps += " " + st.name + "=" + StepStatusName(st.status()) +
               (st.retry_at ? "@" + std::to_string(st.retry_at - World::kEpochMs) : "");
    auto lease = store.GetLease(id);
    std::string held = !lease.ok() ? "no lease"
                                   : "lease " + lease->owner + " until " +
                                         std::to_string(lease->expires_at - World::kEpochMs) +
                                         " gen " + std::to_string(lease->generation);
    return "liveness: instance " + id + " is still " + SagaStatusName(ss) + " (" + steps + " ; " +
           held + " )";
  }
  if (ss == SagaStatus::kNeedsReview && inst->review_reason().empty())
    return "instance " + id + " is in NEEDS_REVIEW without a reason";
  const SagaDefinition* def = inst->is_run() ? inst->run_definition().get() : nullptr;
  for (const auto& d : w.sagas())
    if (!def && d.name == inst->saga()) def = &d;
  if (!def) return "instance " + id + ": unknown saga " + inst->saga();
  for (size_t i = 0; i < inst->steps().size(); ++i) {
    std::string v = CheckStep(w, id, *def, *inst, i);
    if (!v.empty()) return v;
  }
  return CheckUndoOrder(w, id, *inst);
}

}  // namespace

// No guard of sim_tools is exceeded: the calls it counts (those that may
// have or may still take effect) are within its bound per run and per
// principal. A call that stopped counting never counts again, so the end
// is the most the count ever held for what was appended past the guard.
std::string CheckGuards(const std::vector<nlohmann::json>& snapshots) {
  const ToolboxDefinition tools = SimTools();
  for (const Guard& g : tools.guards) {
    std::map<std::string, int64_t> counted;  // run id or owner -> calls
    for (const auto& snap : snapshots) {
      if (snap.value("kind", "") != "run" || snap.value("saga", "") != tools.name) continue;
      const std::string scope = g.per_principal() ? snap.value("owner", "") : snap.value("id", "");
      for (const auto& c : snap.value("calls", nlohmann::json::array()))
        if (c.value("tool", "") == g.tool && CallCounted(c.value("status", ""))) ++counted[scope];
    }
    for (const auto& [scope, n] : counted)
      if (n > g.max_calls)
        return "guard " + g.name + " exceeded: " + std::to_string(n) + " calls counted for " +
               scope + ", at most " + std::to_string(g.max_calls);
  }
  return "";
}

std::string CheckEnd(World& w, const std::set<std::string>& keys) {
  MemoryStore store(w.data());
  auto page = store.ListInstances({}, 100000, "");
  if (!page.ok()) return "store unreadable";
  if (std::string v = CheckGuards(page->instances); !v.empty()) return v;
  if (page->instances.size() > keys.size())
    return std::to_string(page->instances.size()) + " instances from " +
           std::to_string(keys.size()) + " client keys";
  for (const auto& snap : page->instances) {
    std::string v = CheckInstance(w, store, snap.value("id", ""), snap);
    if (!v.empty()) return v;
  }
  return "";
}

}  // namespace sagad::sim

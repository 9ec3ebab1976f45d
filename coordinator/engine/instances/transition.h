// Tx: the events and operation records of one transition of an instance.
// Each event is applied to the instance (a copy the engine commits only if
// the whole transition applied) as it is added, so the Boost.MSM tables
// check every one; Operations() gives the operation records of the steps it
// touched. Thread-safety: none; one transition at a time.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "coordinator/store/store.h"
#include "sagas/event_types.h"
#include "sagas/instance.h"

namespace sagad {

class Tx {
 public:
  Tx(Instance& inst, int64_t now) : inst_(inst), now_(now) {}

  // A step the instance does not hold (an index decided on a copy the
  // instance has moved past) is MovedOn: the caller plans again.
  Status Step(int i, StepEvent e, nlohmann::json data = nlohmann::json::object()) {
    SAGAD_RETURN_IF_ERROR(Holds(i));
    return Add(inst_.step(i).name, StepEventName(e), std::move(data), i);
  }
  Status Saga(SagaEvent e, nlohmann::json data = nlohmann::json::object()) {
    return Add("", SagaEventName(e), std::move(data), -1);
  }
  // A step note that changes no machine state (sagas/event_types.h).
  Status Note(int i, StepNote note, nlohmann::json data) {
    SAGAD_RETURN_IF_ERROR(Holds(i));
    return Add(inst_.step(i).name, StepNoteName(note), std::move(data), i);
  }
  // A run's new call: a new step named `call_id` (Instance::Apply checks it).
  Status Call(const std::string& call_id, nlohmann::json data) {
    return Add(call_id, kCallAppendedEvent, std::move(data), -1);
  }
  // A run's decision (Instance::Apply checks it).
  Status Decision(nlohmann::json data) {
    return Add("", kDecisionRecordedEvent, std::move(data), -1);
  }
  int64_t now() const { return now_; }
  // Rejects every step awaiting approval (the saga turns back or waits on
  // something else: those requests will not be sent).
  Status RejectAwaitingApprovals(const std::string& by, const std::string& reason) {
    for (size_t i = 0; i < inst_.steps().size(); ++i)
      if (inst_.step(i).status() == StepStatus::kAwaitingApproval)
        SAGAD_RETURN_IF_ERROR(
            Step(static_cast<int>(i), StepEvent::kReject, {{"by", by}, {"reason", reason}}));
    return Status::Ok();
  }
  const Instance& inst() const { return inst_; }
  std::vector<Event>& events() { return events_; }
  std::vector<OperationRecord> Operations() const {
    std::vector<OperationRecord> ops;
    for (int i : touched_) {
      const StepState& st = inst_.step(i);
      bool in_comp = st.status() == StepStatus::kCompensating ||
                     st.status() == StepStatus::kCompensated ||
                     st.machine.reviewing_compensation() || st.comp_attempts > 0;
      if (!st.key.empty()) {
        OperationRecord op;
        op.key = st.key;
        op.instance_id = inst_.id();
        op.step = st.name;
        op.kind = "forward";
        op.args_hash = st.args_hash;
        op.state = in_comp ? "COMMITTED" : StepStatusName(st.status());
        op.attempts = st.attempts;
        op.external_ref = st.external_ref;
        op.result = st.result;
        op.last_error = st.last_error;
        op.created_at = st.first_sent_at > 0 ? st.first_sent_at : now_;
        op.updated_at = now_;
        ops.push_back(std::move(op));
      }
      if (!st.comp_key.empty()) {
        OperationRecord op;
        op.key = st.comp_key;
        op.instance_id = inst_.id();
        op.step = st.name;
        op.kind = "compensation";
        op.args_hash = st.comp_args_hash;
        op.state =
            st.status() == StepStatus::kCommitted ? "NOT_EXECUTED" : StepStatusName(st.status());
        op.attempts = st.comp_attempts;
        op.result = st.comp_result;
        op.last_error = st.comp_last_error;
        op.updated_at = now_;
        ops.push_back(std::move(op));
      }
    }
    return ops;
  }

 private:
  Status Holds(int i) const {
    if (i >= 0 && static_cast<size_t>(i) < inst_.steps().size()) return Status::Ok();
    return MovedOn("instance " + inst_.id() + " has no step " + std::to_string(i));
  }
  Status Add(std::string step, std::string type, nlohmann::json data, int index) {
    Event e;
    e.seq = inst_.last_seq() + 1;
    e.at_ms = now_;
    e.type = std::move(type);
    e.step = std::move(step);
    e.data = std::move(data);
    SAGAD_RETURN_IF_ERROR(inst_.Apply(e));
    events_.push_back(std::move(e));
    if (index >= 0) touched_.insert(index);
    return Status::Ok();
  }

  Instance& inst_;
  int64_t now_;
  std::vector<Event> events_;
  std::set<int> touched_;
};

}  // namespace sagad

// The parts of Instance only a run has (sagas/instance.h): its creation, its
// calls appended at run time, its OPEN status.
#include "sagas/event_types.h"
#include "sagas/instance.h"
#include "sagas/toolbox.h"
#include "util/json_limits.h"

namespace sagad {

const char* Instance::StatusName() const {
  if (run_ && status() == SagaStatus::kRunning) return "OPEN";
  return SagaStatusName(status());
}

bool Instance::Settled() const {
  if (!run_ || status() != SagaStatus::kRunning) return SagaSettled(status());
  for (const StepState& st : steps_)
    if (!CallSettled(st.status())) return false;
  return true;
}

Status Instance::ApplyRunCreated(const Event& e) {
  const nlohmann::json run = e.data.value("run", nlohmann::json::object());
  int64_t idle_timeout_ms = 0;
  if (!run.is_object() ||
      !AsInt64(run.value("idle_timeout_ms", nlohmann::json(0)), &idle_timeout_ms))
    return InvalidArgument("malformed instance_created: run.idle_timeout_ms must be an integer");
  if (!steps_.empty())
    return InvalidArgument("malformed instance_created: a run starts with no calls");
  metadata_ = e.data.value("metadata", nlohmann::json::object());
  run_ = RunDefinition(saga_, saga_version_, idle_timeout_ms, run.value("idle_abort", false));
  return Status::Ok();
}

const nlohmann::json* Instance::Decision(const std::string& id) const {
  for (const auto& d : decisions_)
    if (d.value("decision_id", "") == id) return &d;
  return nullptr;
}

Status Instance::ApplyDecision(const Event& e) {
  if (!run_) return FailedPrecondition("decision_recorded: " + id_ + " is not a run");
  const std::string id = e.data.value("decision_id", "");
  if (!IsCallId(id)) return InvalidArgument("decision_recorded: bad decision_id '" + id + "'");
  if (Decision(id)) return InvalidArgument("decision_recorded: the run has '" + id + "' already");
  if (decisions_.size() >= kMaxDecisions)
    return FailedPrecondition("decision_recorded: the run keeps " + std::to_string(kMaxDecisions) +
                              " decisions at most");
  if (!e.data.contains("value")) return InvalidArgument("decision_recorded: no value");
  nlohmann::json d = e.data;
  d["recorded_at"] = e.at_ms;
  d["seq"] = e.seq;
  d["after_calls"] = steps_.size();  // its place among the calls
  decisions_.push_back(std::move(d));
  return Status::Ok();
}

Status Instance::ApplyCallAppended(const Event& e) {
  if (!run_) return FailedPrecondition("call_appended: " + id_ + " is not a run");
  SagaStatus ss = status();
  if (ss != SagaStatus::kRunning && ss != SagaStatus::kAwaitingApproval)
    return FailedPrecondition(std::string("call_appended: the run is ") + StatusName());
  if (!IsCallId(e.step)) return InvalidArgument("call_appended: bad call_id '" + e.step + "'");
  if (StepIndex(e.step) >= 0)
    return InvalidArgument("call_appended: the run has a call '" + e.step + "' already");
  if (steps_.size() >= static_cast<size_t>(kMaxMaxCalls))
    return FailedPrecondition("call_appended: the run has " + std::to_string(steps_.size()) +
                              " calls, the most a run may make");
  auto def = std::make_shared<SagaDefinition>(*run_);
  try {
    auto step = StepFromJson(e.data.at("definition"));
    if (!step.ok()) return step.status();
    if (step->name != e.step) return InvalidArgument("call_appended: definition of another call");
    step->tool = e.data.value("tool", "");
    def->steps.push_back(std::move(*step));
  } catch (const nlohmann::json::exception& ex) {
    return InvalidArgument(std::string("malformed call_appended: ") + ex.what());
  }
  StepState st;
  st.name = e.step;
  st.call = e.data;
  st.call.erase("definition");
  st.call["call_id"] = e.step;
  st.call["appended_at"] = e.at_ms;
  steps_.push_back(std::move(st));
  run_ = std::move(def);
  return Status::Ok();
}

}  // namespace sagad

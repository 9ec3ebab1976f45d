#include "sagas/instance.h"

#include <cstdint>
#include <cstdlib>

#include "sagas/ancestors.h"
#include "sagas/event_types.h"
#include "util/check.h"
#include "util/json_limits.h"

namespace sagad {

void Instance::NoSuchStep(size_t i) const {
  SAGAD_CHECK(false) << "instance " << id_ << " has no step " << i << " (of " << steps_.size()
                     << ")";
  std::abort();
}

namespace {

std::string Str(const nlohmann::json& data, const char* field) {
  auto it = data.find(field);
  if (it == data.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : DumpJson(*it);
}

}  // namespace

Event Instance::CreatedEvent(const std::string& id, const SagaDefinition& def,
                             const nlohmann::json& input, const nlohmann::json& trace,
                             const nlohmann::json& metadata, const std::string& by) {
  Event e;
  e.type = kInstanceCreatedEvent;
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json after = nlohmann::json::array();
  for (size_t i = 0; i < def.steps.size(); ++i) {
    names.push_back(def.steps[i].name);
    after.push_back(def.DependencyNames(i));
  }
  e.data = {{"id", id},       {"saga", def.name}, {"version", def.version},
            {"input", input}, {"steps", names},   {"after", after}};
  if (!trace.is_null()) e.data["trace"] = trace;
  if (!by.empty()) e.data["by"] = by;
  if (def.run) {
    e.data["kind"] = "run";
    e.data["run"] = {{"idle_timeout_ms", def.idle_timeout_ms}, {"idle_abort", def.idle_abort}};
    e.data["metadata"] = metadata.is_object() ? metadata : nlohmann::json::object();
  }
  return e;
}

StatusOr<Instance> Instance::Replay(const std::string& id, const SagaDefinition& def,
                                    const std::vector<Event>& events) {
  Instance inst;
  for (const Event& e : events) {
    Status s = inst.Apply(e);
    if (!s.ok())
      return InvalidArgument("replay of " + id + " failed at event " + std::to_string(e.seq) +
                             ": " + s.message());
  }
  if (inst.id_ != id)
    return InvalidArgument("event log of " + id + " does not start with its creation");
  if (inst.saga_ != def.name || inst.steps_.size() != def.steps.size())
    return InvalidArgument("instance " + id + " does not match definition " + def.name);
  return inst;
}

StatusOr<Instance> Instance::Replay(const std::string& id, const std::vector<Event>& events) {
  Instance inst;
  for (const Event& e : events) {
    Status s = inst.Apply(e);
    if (!s.ok())
      return InvalidArgument("replay of " + id + " failed at event " + std::to_string(e.seq) +
                             ": " + s.message());
  }
  if (inst.id_ != id)
    return InvalidArgument("event log of " + id + " does not start with its creation");
  return inst;
}

int Instance::StepIndex(const std::string& name) const {
  for (size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

// What an accepted step event records besides the machine's new state.
// `before`: the step's status before the event.
void RecordStepEvent(StepState& st, StepEvent ev, const Event& e, bool compensation_phase,
                     StepStatus before) {
  switch (ev) {
    case StepEvent::kStart:
      // A send after one whose outcome was never recorded (STARTED: the
      // outcome's commit failed, or the process died) or is unknown.
      if (before == StepStatus::kStarted || before == StepStatus::kUnknown)
        st.forward_in_doubt = true;
      ++st.attempts;
      if (st.first_sent_at == 0) st.first_sent_at = e.at_ms;
      st.key = Str(e.data, "key");
      st.args_hash = Str(e.data, "args_hash");
      break;
    case StepEvent::kCommit:
      st.forward_in_doubt = false;
      st.commit_seq = e.seq;
      st.result = e.data.value("result", nlohmann::json());
      st.external_ref = Str(e.data, "external_ref");
      st.retries = 0;
      if (e.data.contains("resolution")) st.resolution = e.data["resolution"];
      break;
    case StepEvent::kFail:
    case StepEvent::kConfirmRefused:
    case StepEvent::kOutcomeUnknown:
    case StepEvent::kEscalate:
      if (!compensation_phase && ev == StepEvent::kOutcomeUnknown) st.forward_in_doubt = true;
      if (!compensation_phase && (ev == StepEvent::kFail || ev == StepEvent::kConfirmRefused))
        st.forward_in_doubt = false;
      (compensation_phase ? st.comp_last_error : st.last_error) = Str(e.data, "error");
      break;
    case StepEvent::kNotExecuted:
      // Recorded while in doubt only once it is known (StepRunner): an
      // answer, or an operator's resolution.
      if (!compensation_phase) st.forward_in_doubt = false;
      (compensation_phase ? st.comp_last_error : st.last_error) = Str(e.data, "error");
      if (!compensation_phase) ++st.retries;
      if (e.data.contains("resolution")) st.resolution = e.data["resolution"];
      break;
    case StepEvent::kApprove:
    case StepEvent::kReject:
      st.approval = e.data;
      st.approval["decision"] = ev == StepEvent::kApprove ? "approved" : "rejected";
      st.approval["at"] = e.at_ms;
      break;
    case StepEvent::kBeginCompensation:
      ++st.comp_attempts;
      st.comp_key = Str(e.data, "key");
      st.comp_args_hash = Str(e.data, "args_hash");
      break;
    case StepEvent::kCompensationDone:
      st.comp_result = e.data.value("result", nlohmann::json());
      st.comp_external_ref = Str(e.data, "external_ref");
      if (e.data.contains("resolution")) st.resolution = e.data["resolution"];
      break;
    case StepEvent::kCompensationUnknown:
      st.comp_last_error = Str(e.data, "error");
      break;
    case StepEvent::kRequestApproval:
      st.approval_requested_at = e.at_ms;
      break;
    case StepEvent::kSkip:
      st.forward_in_doubt = false;
      st.commit_seq = e.seq;
      st.result = e.data.value("result", nlohmann::json());
      st.external_ref = Str(e.data, "external_ref");
      st.resolution = e.data;
      st.resolution["outcome"] = "skipped";
      break;
  }
}

}  // namespace

Status Instance::Apply(const Event& e) {
  // Every field below is read from an object: a log whose data is anything
  // else (a corrupt record) is refused, not thrown on (found by fuzz_replay).
  if (!e.data.is_object())
    return InvalidArgument("event " + std::to_string(e.seq) + " (" + e.type +
                           "): data must be a JSON object");
  if (e.type == kInstanceCreatedEvent) {
    if (last_seq_ != 0) return FailedPrecondition("instance_created must be the first event");
    SAGAD_RETURN_IF_ERROR(ApplyCreated(e));
  } else if (last_seq_ == 0) {
    return FailedPrecondition("first event must be instance_created, got " + e.type);
  } else if (e.type == kCallAppendedEvent) {
    SAGAD_RETURN_IF_ERROR(ApplyCallAppended(e));
  } else if (e.type == kDecisionRecordedEvent) {
    SAGAD_RETURN_IF_ERROR(ApplyDecision(e));
  } else if (e.step.empty()) {
    SagaEvent se;
    if (!ParseSagaEvent(e.type, &se)) return InvalidArgument("unknown saga event " + e.type);
    SAGAD_RETURN_IF_ERROR(machine_.Process(se));
    for (StepState& st : steps_) st.view_text.reset();  // rare: no need to know what it touched
    if (se == SagaEvent::kEscalate) review_reason_ = Str(e.data, "reason");
    if (se == SagaEvent::kResume || se == SagaEvent::kStartCompensation) review_reason_.clear();
  } else {
    SAGAD_RETURN_IF_ERROR(ApplyStepEvent(e));
  }
  last_seq_ = e.seq;
  updated_at_ = e.at_ms;
  return Status::Ok();
}

Status Instance::ApplyCreated(const Event& e) {
  try {
    id_ = e.data.at("id").get<std::string>();
    saga_ = e.data.at("saga").get<std::string>();
    int64_t version = 0;
    if (!AsInt64(e.data.at("version"), &version) || version < 0 || version > INT32_MAX)
      return InvalidArgument("malformed instance_created: version must be a 32-bit integer");
    saga_version_ = static_cast<int>(version);
    input_ = e.data.at("input");
    trace_ = e.data.value("trace", nlohmann::json());
    owner_ = e.data.value("by", "");
    for (const auto& n : e.data.at("steps")) {
      StepState st;
      st.name = n.get<std::string>();
      steps_.push_back(std::move(st));
    }
    // Dependencies; a log from before graphs has none: each step after
    // the one before it.
    const nlohmann::json* after = e.data.contains("after") ? &e.data["after"] : nullptr;
    if (after && (!after->is_array() || after->size() != steps_.size()))
      return InvalidArgument("malformed instance_created: after must list every step");
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (!after) {
        if (i > 0) steps_[i].after.push_back(static_cast<int>(i) - 1);
        continue;
      }
      for (const auto& n : (*after)[i]) {
        int d = StepIndex(n.get<std::string>());
        if (d < 0 || d == static_cast<int>(i))
          return InvalidArgument("malformed instance_created: bad dependency of " + steps_[i].name);
        steps_[i].after.push_back(d);
      }
    }
    if (e.data.value("kind", "") == "run") SAGAD_RETURN_IF_ERROR(ApplyRunCreated(e));
  } catch (const nlohmann::json::exception& ex) {
    return InvalidArgument(std::string("malformed instance_created: ") + ex.what());
  }
  created_at_ = e.at_ms;
  return Status::Ok();
}

Status Instance::ApplyStepEvent(const Event& e) {
  int i = StepIndex(e.step);
  if (i < 0) return InvalidArgument("event for unknown step " + e.step);
  StepState& st = steps_[i];
  st.view_text.reset();
  st.retry_at = 0;
  auto interrupted = e.data.find("interrupted");
  StepNote note;
  const bool is_note = ParseStepNote(e.type, &note);
  st.budget_exempt = (is_note && note == StepNote::kRetryDeferred) ||
                     (e.type == StepEventName(StepEvent::kNotExecuted) &&
                      interrupted != e.data.end() && *interrupted == true);
  if (e.data.contains("retry_at") && !AsInt64(e.data["retry_at"], &st.retry_at))
    return InvalidArgument("event " + std::to_string(e.seq) + ": retry_at must be an integer");
  if (is_note && note != StepNote::kReconciled) {
    if (note == StepNote::kRetryRequested) st.retries = 0;
    return Status::Ok();
  }
  if (is_note) {  // reconciled
    if (Str(e.data, "phase") == "compensation") {
      ++st.comp_reconciliations;
      st.comp_last_error = Str(e.data, "error");
    } else {
      ++st.reconciliations;
      st.last_error = Str(e.data, "error");
    }
    return Status::Ok();
  }
  StepEvent ev;
  if (!ParseStepEvent(e.type, &ev)) return InvalidArgument("unknown step event " + e.type);
  bool compensation_phase = st.status() == StepStatus::kCompensating ||
                            st.machine.reviewing_compensation() ||
                            ev == StepEvent::kBeginCompensation;
  const StepStatus before = st.status();
  SAGAD_RETURN_IF_ERROR(st.machine.Process(ev));
  RecordStepEvent(st, ev, e, compensation_phase, before);
  return Status::Ok();
}

nlohmann::json Instance::StepJson(const StepState& st) const {
  nlohmann::json after = nlohmann::json::array();
  for (int d : st.after) after.push_back(steps_[d].name);
  // A run's call that will never be sent (its run was aborted or ended
  // before it went) is CANCELLED, never PLANNED: nothing will send it.
  const SagaStatus ss = status();
  const bool cancelled = run_ && st.status() == StepStatus::kPlanned &&
                         (ss == SagaStatus::kCompensating || ss == SagaStatus::kCompensated ||
                          ss == SagaStatus::kCompleted);
  nlohmann::json j = {{"name", st.name},
                      {"after", std::move(after)},
                      {"status", cancelled ? "CANCELLED" : StepStatusName(st.status())},
                      {"key", st.key},
                      {"attempts", st.attempts},
                      {"reconciliations", st.reconciliations},
                      {"result", st.result},
                      {"external_ref", st.external_ref},
                      {"last_error", st.last_error},
                      {"approved", st.machine.approved()}};
  if (!st.args_hash.empty()) j["args_hash"] = st.args_hash;
  if (st.call.is_object())
    for (const auto& item : st.call.items()) j[item.key()] = item.value();
  if (!st.approval.is_null()) j["approval"] = st.approval;
  if (!st.resolution.is_null()) j["resolution"] = st.resolution;
  if (st.retry_at > 0) j["next_retry_at"] = st.retry_at;
  if (st.comp_attempts > 0 || st.machine.reviewing_compensation()) {
    const char* cs = st.status() == StepStatus::kCompensated    ? "COMPENSATED"
                     : st.machine.reviewing_compensation()      ? "NEEDS_REVIEW"
                     : st.status() == StepStatus::kCompensating ? "COMPENSATING"
                                                                : "PENDING";
    j["compensation"] = {{"status", cs},
                         {"key", st.comp_key},
                         {"attempts", st.comp_attempts},
                         {"reconciliations", st.comp_reconciliations},
                         {"result", st.comp_result},
                         {"external_ref", st.comp_external_ref},
                         {"last_error", st.comp_last_error}};
  } else {
    j["compensation"] = nullptr;
  }
  return j;
}

// Everything of ToJson() but the input, the trace and the steps.
nlohmann::json Instance::TopJson() const {
  nlohmann::json j = {{"id", id_},
                      {"saga", saga_},
                      {"saga_version", saga_version_},
                      {"status", StatusName()},
                      {"created_at", created_at_},
                      {"updated_at", updated_at_},
                      {"last_seq", last_seq_},
                      {"version", version_},
                      {"schema_version", kRecordSchemaVersion}};
  if (!review_reason_.empty()) j["review_reason"] = review_reason_;
  if (run_) j["kind"] = "run";
  // Absent when none: a snapshot written before decisions existed replays
  // to the same bytes.
  if (!decisions_.empty()) j["decisions"] = decisions_;
  if (!owner_.empty()) j["owner"] = owner_;
  // An OPEN run waiting for its silent agent: until when (the idle rule of
  // policies/deadlines.h, from the same two values).
  if (run_ && run_->idle_timeout_ms > 0 && status() == SagaStatus::kRunning && Settled())
    j["idle_until"] = updated_at_ + run_->idle_timeout_ms;
  std::vector<int> current = CurrentSteps();
  int cur = current.empty() ? -1 : current[0];
  nlohmann::json names = nlohmann::json::array();
  for (int i : current) names.push_back(steps_[i].name);
  j["current_steps"] = std::move(names);
  j["current_step"] = cur >= 0 ? nlohmann::json(steps_[cur].name) : nlohmann::json();
  std::string waiting = WaitingFor();
  j["waiting_for"] = waiting.empty() ? nlohmann::json() : nlohmann::json(waiting);
  if (cur >= 0 && steps_[cur].retry_at > 0) j["next_retry_at"] = steps_[cur].retry_at;
  return j;
}

nlohmann::json Instance::ToJson() const {
  nlohmann::json j = TopJson();
  nlohmann::json steps = nlohmann::json::array();
  for (const StepState& st : steps_) steps.push_back(StepJson(st));
  if (run_) {
    j["calls"] = steps;  // a run's steps are its calls
    j["metadata"] = metadata_;
  }
  j["steps"] = std::move(steps);
  j["input"] = input_;
  if (!trace_.is_null()) j["trace"] = trace_;
  return j;
}

std::string Instance::SnapshotText() {
  if (!input_text_) input_text_ = std::make_shared<const std::string>(DumpJson(input_));
  if (!trace_text_) trace_text_ = std::make_shared<const std::string>(DumpJson(trace_));
  if (!metadata_text_) metadata_text_ = std::make_shared<const std::string>(DumpJson(metadata_));
  std::string steps = "[";
  for (StepState& st : steps_) {
    if (!st.view_text) st.view_text = std::make_shared<const std::string>(DumpJson(StepJson(st)));
    if (steps.size() > 1) steps += ',';
    steps += *st.view_text;
  }
  steps += ']';
  // One dump of the rest, with null in the places of the kept texts. A
  // `"input":null` there is the member's: inside a JSON string every quote
  // is escaped, and the other members hold no objects.
  nlohmann::json top = TopJson();
  std::vector<std::pair<std::string, const std::string*>> kept;
  if (run_) {  // "calls" comes before "input", "metadata" after it
    kept.push_back({"\"calls\":null", &steps});
    top["calls"] = nullptr;
  }
  kept.push_back({"\"input\":null", input_text_.get()});
  if (run_) {
    kept.push_back({"\"metadata\":null", metadata_text_.get()});
    top["metadata"] = nullptr;
  }
  kept.push_back({"\"steps\":null", &steps});
  top["input"] = nullptr;
  top["steps"] = nullptr;
  if (!trace_.is_null()) {
    top["trace"] = nullptr;
    kept.push_back({"\"trace\":null", trace_text_.get()});
  }
  const std::string rest = DumpJson(top);
  std::string out;
  out.reserve(rest.size() + 2 * steps.size() + input_text_->size() + trace_text_->size() +
              metadata_text_->size());
  size_t from = 0;
  for (const auto& [placeholder, text] : kept) {  // in key order, as the map writes them
    size_t at = rest.find(placeholder, from);
    SAGAD_CHECK(at != std::string::npos) << "snapshot member " << placeholder;
    size_t value = at + placeholder.size() - 4;  // the "null"
    out.append(rest, from, value - from);
    out += *text;
    from = value + 4;
  }
  out.append(rest, from, std::string::npos);
  return out;
}

bool Instance::IsAncestor(int a, int b) const {
  // Depth-first over the (small, acyclic) dependency lists of b.
  std::vector<int> stack = steps_[b].after;
  std::vector<char> seen(steps_.size(), 0);
  while (!stack.empty()) {
    int k = stack.back();
    stack.pop_back();
    if (k == a) return true;
    if (seen[k]) continue;
    seen[k] = 1;
    stack.insert(stack.end(), steps_[k].after.begin(), steps_[k].after.end());
  }
  return false;
}

std::vector<int> Instance::CurrentSteps() const {
  const int n = static_cast<int>(steps_.size());
  std::vector<int> out;
  if (status() == SagaStatus::kCompleted || status() == SagaStatus::kCompensated) return out;
  bool back = status() == SagaStatus::kCompensating || reviewing_compensation();
  if (back) {
    // A committed step still to undo (or being undone) holds up its ancestors.
    auto pending_undo = [&](int k) {
      StepStatus s = steps_[k].status();
      return s == StepStatus::kCommitted || s == StepStatus::kCompensating ||
             (s == StepStatus::kNeedsReview && steps_[k].machine.reviewing_compensation());
    };
    std::vector<char> blocked = AncestorsOfAny(steps_, pending_undo);
    for (int i = 0; i < n; ++i) {
      StepStatus s = steps_[i].status();
      if (s == StepStatus::kCompensating || s == StepStatus::kNeedsReview ||
          s == StepStatus::kStarted || s == StepStatus::kUnknown) {
        out.push_back(i);
        continue;
      }
      if (s == StepStatus::kCommitted && !blocked[i]) out.push_back(i);
    }
    return out;
  }
  if (run_) {  // a run's calls go one at a time: the first not settled
    for (int i = 0; i < n; ++i)
      if (!CallSettled(steps_[i].status())) return {i};
    return out;
  }
  for (int i = 0; i < n; ++i) {
    if (steps_[i].status() == StepStatus::kCommitted) continue;
    bool ready = true;
    for (int d : steps_[i].after) ready = ready && steps_[d].status() == StepStatus::kCommitted;
    if (ready) out.push_back(i);
  }
  return out;
}

int Instance::CurrentStep() const {
  std::vector<int> cur = CurrentSteps();
  return cur.empty() ? -1 : cur[0];
}

std::string Instance::WaitingFor() const {
  switch (status()) {
    case SagaStatus::kAwaitingApproval:
      return "approval";
    case SagaStatus::kNeedsReview:
      return "review";
    case SagaStatus::kRunning:
    case SagaStatus::kCompensating: {
      int cur = CurrentStep();
      return cur >= 0 && steps_[cur].retry_at > 0 ? "retry" : "";
    }
    default:
      return "";
  }
}

}  // namespace sagad

// The Store's record types as JSON (both stores keep them in this form).
#include "coordinator/store/store.h"

#include <algorithm>
#include <cstdio>

#include "coordinator/store/lease_rule.h"
#include "util/json_limits.h"

namespace sagad {

Status InstanceNotFound(const std::string& id) {
  return NotFound("instance '" + id + "' does not exist");
}

nlohmann::json OperationRecord::ToJson() const {
  return {{"key", key},
          {"instance_id", instance_id},
          {"step", step},
          {"kind", kind},
          {"args_hash", args_hash},
          {"state", state},
          {"attempts", attempts},
          {"external_ref", external_ref},
          {"result", result},
          {"last_error", last_error},
          {"created_at", created_at},
          {"updated_at", updated_at}};
}

OperationRecord OperationRecord::FromJson(const nlohmann::json& j) {
  OperationRecord r;
  r.key = j.value("key", "");
  r.instance_id = j.value("instance_id", "");
  r.step = j.value("step", "");
  r.kind = j.value("kind", "");
  r.args_hash = j.value("args_hash", "");
  r.state = j.value("state", "");
  r.attempts = j.value("attempts", 0);
  r.external_ref = j.value("external_ref", "");
  r.result = j.value("result", nlohmann::json());
  r.last_error = j.value("last_error", "");
  r.created_at = j.value("created_at", int64_t(0));
  r.updated_at = j.value("updated_at", int64_t(0));
  return r;
}

nlohmann::json Lease::ToJson() const {
  return {{"owner", owner}, {"expires_at", expires_at}, {"generation", generation}};
}

Lease Lease::FromJson(const nlohmann::json& j) {
  Lease l;
  l.owner = j.value("owner", "");
  l.expires_at = j.value("expires_at", int64_t(0));
  l.generation = j.value("generation", uint64_t(0));
  return l;
}

nlohmann::json Submission::ToJson() const {
  return {{"key", key},
          {"request_hash", request_hash},
          {"instance_id", instance_id},
          {"response_status", response_status},
          {"response", response},
          {"created_at", created_at}};
}

Submission Submission::FromJson(const nlohmann::json& j) {
  Submission s;
  s.key = j.value("key", "");
  s.request_hash = j.value("request_hash", "");
  s.instance_id = j.value("instance_id", "");
  s.response_status = j.value("response_status", 0);
  s.response = j.value("response", nlohmann::json());
  s.created_at = j.value("created_at", int64_t(0));
  return s;
}

SnapshotRecord SnapshotRecord::FromJson(const nlohmann::json& snapshot) {
  SnapshotRecord r;
  r.text = DumpJson(snapshot);
  r.id = snapshot.value("id", "");
  r.saga = snapshot.value("saga", "");
  r.status = snapshot.value("status", "");
  auto waiting = snapshot.find("waiting_for");
  if (waiting != snapshot.end() && waiting->is_string()) r.waiting_for = *waiting;
  auto owner = snapshot.find("owner");
  if (owner != snapshot.end() && owner->is_string()) r.owner = *owner;
  r.version = snapshot.value("version", uint64_t(0));
  r.updated_at = snapshot.value("updated_at", int64_t(0));
  return r;
}

SnapshotRecord SnapshotRecord::FromInstance(Instance& inst) {
  SnapshotRecord r;
  r.text = inst.SnapshotText();
  r.id = inst.id();
  r.saga = inst.saga();
  r.status = inst.StatusName();
  std::string waiting = inst.WaitingFor();
  if (!waiting.empty()) r.waiting_for = waiting;
  r.owner = inst.owner();
  r.version = inst.version();
  r.updated_at = inst.updated_at();
  return r;
}

nlohmann::json SnapshotRecord::Parse() const { return nlohmann::json::parse(text); }

std::string IdFloor(int64_t ms) {
  char buf[24];
  snprintf(buf, sizeof buf, "%012llx", static_cast<unsigned long long>(std::max<int64_t>(0, ms)));
  return buf;
}

int64_t CreatedAtOfId(const std::string& id) {
  if (id.size() < 12) return 0;
  int64_t ms = 0;
  for (size_t i = 0; i < 12; ++i) {
    const char c = id[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    ms = ms * 16 + d;
  }
  return ms;
}

bool WithinCreated(const InstanceFilter& filter, const std::string& id) {
  const int64_t at = CreatedAtOfId(id);
  if (filter.created_after > 0 && at <= filter.created_after) return false;
  return filter.created_before <= 0 || at < filter.created_before;
}

bool Matches(const InstanceFilter& filter, const nlohmann::json& j) {
  if ((filter.created_after > 0 || filter.created_before > 0) &&
      !WithinCreated(filter, j.value("id", "")))
    return false;
  if (!filter.status.empty() && j.value("status", "") != filter.status) return false;
  if (!filter.saga.empty() && j.value("saga", "") != filter.saga) return false;
  if (!filter.owner.empty() && j.value("owner", "") != filter.owner) return false;
  if (!filter.waiting.empty() && !(j.contains("waiting_for") && j["waiting_for"] == filter.waiting))
    return false;
  if (filter.input_field.empty()) return true;
  auto input = j.find(filter.in_metadata ? "metadata" : "input");
  if (input == j.end() || !input->is_object()) return false;
  auto v = input->find(filter.input_field);
  std::string text;
  return v != input->end() && SearchText(*v, &text) && text == filter.input_value;
}

bool SearchText(const nlohmann::json& value, std::string* text) {
  if (value.is_string()) {
    *text = value.get<std::string>();
    return true;
  }
  if (value.is_object() || value.is_array()) return false;
  *text = value.dump();
  return true;
}

StatusOr<Lease> TakeLeaseRule(const std::string& id, Lease l, const std::string& owner,
                              int64_t now_ms, int64_t ttl_ms, const std::string& successor_of) {
  bool predecessor = !successor_of.empty() && l.owner.rfind(successor_of, 0) == 0;
  if (!l.owner.empty() && l.owner != owner && l.expires_at > now_ms && !predecessor)
    return LeaseLost("instance " + id + " is owned by '" + l.owner + "' until " +
                     std::to_string(l.expires_at));
  if (l.owner != owner) ++l.generation;
  l.owner = owner;
  l.expires_at = now_ms + ttl_ms;
  return l;
}

}  // namespace sagad

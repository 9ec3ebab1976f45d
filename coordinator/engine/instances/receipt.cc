#include "coordinator/engine/instances/receipt.h"

#include "adapters/sha256.h"
#include "sagas/event_types.h"
#include "sagas/saga_machine.h"
#include "sagas/step_machine.h"

namespace sagad {
namespace {

const std::string kZeroHash(64, '0');

// Copies the fields of `data` named in `fields` that it has.
void Copy(const nlohmann::json& data, std::initializer_list<const char*> fields,
          nlohmann::json* out) {
  for (const char* f : fields)
    if (data.contains(f) && !data[f].is_null()) (*out)[f] = data[f];
}

// The receipt's entry for `e`; null when the event is not part of one
// (sends, reconciliations, retries: the engine's own doing in between).
nlohmann::json EntryOf(const Event& e) {
  nlohmann::json out = {{"seq", e.seq}, {"at", e.at_ms}, {"by", e.By()}};
  const nlohmann::json& d = e.data;
  if (e.type == kInstanceCreatedEvent) {
    out["type"] = "opened";
    out["instance_id"] = d.value("id", "");
    out["kind"] = d.value("kind", "saga");
    out["name"] = d.value("saga", "");
    out["version"] = d.value("version", 0);
    Copy(d, {"input", "metadata"}, &out);
    return out;
  }
  if (e.type == kDecisionRecordedEvent) {
    out["type"] = "decision";
    Copy(d, {"decision_id", "value", "model", "prompt_version"}, &out);
    return out;
  }
  if (e.type == kCallAppendedEvent) {
    out["type"] = "call";
    out["call_id"] = e.step;
    Copy(d, {"tool", "arguments", "reason", "evidence", "model", "prompt_version", "guard"}, &out);
    return out;
  }
  static const std::vector<std::pair<std::string, const char*>> kStep = {
      {StepEventName(StepEvent::kRequestApproval), "approval_requested"},
      {StepEventName(StepEvent::kApprove), "approved"},
      {StepEventName(StepEvent::kReject), "rejected"},
      {StepEventName(StepEvent::kCommit), "committed"},
      {StepEventName(StepEvent::kFail), "failed"},
      {StepEventName(StepEvent::kConfirmRefused), "failed"},
      {StepEventName(StepEvent::kSkip), "resolved"},
      {StepEventName(StepEvent::kCompensationDone), "undone"},
  };
  static const std::vector<std::pair<std::string, const char*>> kSaga = {
      {SagaEventName(SagaEvent::kComplete), "completed"},
      {SagaEventName(SagaEvent::kStartCompensation), "turned_back"},
      {SagaEventName(SagaEvent::kFinishCompensation), "compensated"},
      {SagaEventName(SagaEvent::kEscalate), "needs_review"},
  };
  for (const auto& [type, name] : e.step.empty() ? kSaga : kStep) {
    if (e.type != type) continue;
    out["type"] = name;
    if (!e.step.empty()) out["step"] = e.step;
    Copy(d, {"digest", "version", "rule", "comment", "reason", "external_ref", "error"}, &out);
    return out;
  }
  return nullptr;
}

std::string HashOf(const std::string& prev, nlohmann::json entry) {
  entry.erase("hash");
  return Sha256Hex(prev + "\n" + CanonicalJson(entry));
}

}  // namespace

nlohmann::json BuildReceipt(const std::vector<Event>& events) {
  nlohmann::json entries = nlohmann::json::array();
  std::string prev = kZeroHash;
  for (const Event& e : events) {
    nlohmann::json entry = EntryOf(e);
    if (entry.is_null()) continue;
    entry["prev"] = prev;
    prev = HashOf(prev, entry);
    entry["hash"] = prev;
    entries.push_back(std::move(entry));
  }
  nlohmann::json out = {{"receipt", 1}, {"entries", entries}, {"head", prev}};
  if (!entries.empty())
    for (const char* f : {"instance_id", "kind", "name", "version"}) out[f] = entries[0][f];
  return out;
}

Status VerifyReceipt(const nlohmann::json& r, size_t* count) {
  *count = 0;
  if (!r.is_object() || r.value("receipt", 0) != 1 || !r.contains("entries") ||
      !r["entries"].is_array() || r["entries"].empty())
    return InvalidArgument("not a receipt: an object with \"receipt\": 1 and its entries");
  for (const auto& item : r.items())
    if (item.key() != "receipt" && item.key() != "entries" && item.key() != "head" &&
        item.key() != "instance_id" && item.key() != "kind" && item.key() != "name" &&
        item.key() != "version")
      return InvalidArgument("the receipt has a field '" + item.key() + "' no receipt has");
  const nlohmann::json& entries = r["entries"];
  if (entries[0].value("type", "") != "opened")
    return InvalidArgument("entry 0 is not the opening");
  for (const char* f : {"instance_id", "kind", "name", "version"})
    if (!r.contains(f) || r[f] != entries[0].value(f, nlohmann::json()))
      return InvalidArgument(std::string("the receipt's ") + f + " is not its first entry's");
  std::string prev = kZeroHash;
  for (size_t i = 0; i < entries.size(); ++i) {
    const nlohmann::json& e = entries[i];
    const std::string where = "entry " + std::to_string(i) + " (seq " +
                              (e.is_object() ? e.value("seq", nlohmann::json()).dump() : "?") + ")";
    if (!e.is_object() || !e.contains("hash") || !e["hash"].is_string())
      return InvalidArgument(where + " has no hash");
    if (e.value("prev", "") != prev)
      return InvalidArgument(where + ": its prev is not the hash of the entry before");
    if (HashOf(prev, e) != e["hash"].get<std::string>())
      return InvalidArgument(where + ": its hash does not match its content");
    prev = e["hash"].get<std::string>();
    ++*count;
  }
  if (r.value("head", "") != prev) return InvalidArgument("head is not the hash of the last entry");
  return Status::Ok();
}

}  // namespace sagad

#include "coordinator/sim/workload.h"

#include <cstdio>
#include <regex>

#include "examples/examples.h"
#include "sagas/step_key.h"

namespace sagad::sim {
namespace {

const char* const kServices[] = {"alpha", "beta", "gamma", "delta"};

RetryPolicy SomeRetry(SeededRandom& r) {
  RetryPolicy p;
  p.max_attempts = 1 + static_cast<int>(r.Below(4));
  p.initial_backoff_ms = 20 + static_cast<int64_t>(r.Below(200));
  p.max_backoff_ms = 3000;
  return p;
}

StepBuilder& AddStep(SagaBuilder& b, SeededRandom& r, const std::string& name, bool compensable) {
  const char* svc = kServices[r.Below(4)];
  StepBuilder& s = b.Step(name).Call(svc, "POST", "/ops", {{"order", "{{input.order}}"}});
  if (compensable) s.Compensate(svc, "POST", "/ops/{{" + name + ".ref}}/undo");
  if (r.Chance(0.1)) s.RequiresApproval();
  if (r.Chance(0.1)) s.RequiresApprovalIf("amount", ">", 1000);
  if (r.Chance(0.3)) s.Retry(SomeRetry(r));
  if (r.Chance(0.1)) s.Deadline(500 + static_cast<int64_t>(r.Below(5000)));
  return s;
}

SagaDefinition RandomList(SeededRandom& r) {
  SagaBuilder b("random_list", 1);
  b.Input({"order", "amount"});
  const int n = 2 + static_cast<int>(r.Below(4));
  const int pivot = r.Chance(0.4) ? static_cast<int>(r.Below(n)) : -1;
  for (int i = 0; i < n; ++i) {
    std::string name = "s" + std::to_string(i);
    if (i == pivot) {
      b.Step(name)
          .Call(kServices[r.Below(4)], "POST", "/pivot", {{"order", "{{input.order}}"}})
          .Irreversible();
      continue;
    }
    AddStep(b, r, name, pivot < 0 || i < pivot ? r.Chance(0.85) : r.Chance(0.3));
  }
  if (r.Chance(0.2)) b.Deadline(2000 + static_cast<int64_t>(r.Below(20000)));
  auto def = b.Build();
  return def.ok() ? *def : OrderFulfilment();
}

SagaDefinition RandomGraph(SeededRandom& r) {
  SagaBuilder b("random_graph", 1);
  b.Input({"order", "amount"});
  const int n = 3 + static_cast<int>(r.Below(4));
  for (int i = 0; i < n; ++i) {
    std::string name = "g" + std::to_string(i);
    std::vector<std::string> after;
    for (int j = 0; j < i; ++j)
      if (r.Chance(0.4)) after.push_back("g" + std::to_string(j));
    AddStep(b, r, name, r.Chance(0.85)).AfterSteps(after);
  }
  b.CompensationOrder(r.Chance(0.5) ? CompensationOrder::kReverseTopological
                                    : CompensationOrder::kReverseCompletion);
  auto def = b.Build();
  return def.ok() ? *def : TripBooking();
}

// `def` as its author wrote it in JSON, now and then with the approval key
// of a gated step misspelt; the definition checks must refuse that.
SagaDefinition AsWritten(const SagaDefinition& def, SeededRandom& typos) {
  static const char* const kTypos[] = {"require_approval", "requires_aproval", "requiresApproval"};
  std::vector<size_t> gated;
  for (size_t i = 0; i < def.steps.size(); ++i)
    if (def.steps[i].requires_approval) gated.push_back(i);
  if (gated.empty() || !typos.Chance(0.3)) return def;
  nlohmann::json j = def.ToJson();
  nlohmann::json& step = j["steps"][gated[typos.Below(gated.size())]];
  step.erase("requires_approval");
  step[kTypos[typos.Below(3)]] = true;
  auto parsed = SagaDefinition::FromJson(j);
  return parsed.ok() ? *parsed : def;  // refused: the author fixes the typo
}

}  // namespace

std::vector<SagaDefinition> SagasFor(SeededRandom& r, SeededRandom& typos,
                                     std::set<std::string>* meant_gated) {
  // The examples are the same for every seed: built (and checked) once.
  static const std::vector<SagaDefinition> kExamples = {OrderFulfilment(), IncidentResponse(),
                                                        TripBooking()};
  std::vector<SagaDefinition> meant = kExamples;
  meant.push_back(RandomList(r));
  meant.push_back(RandomGraph(r));
  std::vector<SagaDefinition> out;
  for (const SagaDefinition& def : meant) {
    for (const auto& st : def.steps)
      if (st.requires_approval) meant_gated->insert(def.name + "/" + st.name);
    out.push_back(AsWritten(def, typos));
  }
  return out;
}

nlohmann::json Workload::InputFor(const SagaDefinition& def, int n) {
  std::vector<std::string>& fields = input_fields_[def.name];
  if (fields.empty()) {  // once per saga: every {{input.X}} it names, and its input
    static const std::regex field(R"(\{\{input\.([A-Za-z_0-9]+)\}\})");
    std::string text = def.ToJson().dump();
    for (std::sregex_iterator it(text.begin(), text.end(), field), end; it != end; ++it)
      fields.push_back((*it)[1].str());
    fields.insert(fields.end(), def.input.begin(), def.input.end());
  }
  nlohmann::json input = nlohmann::json::object();
  for (const auto& f : fields) input[f] = "v" + std::to_string(n);
  input["amount"] = static_cast<int>(world_.random().Below(2000));
  return input;
}

void Workload::Plan(int64_t busy_ms) {
  const int64_t start = world_.now();
  for (int n = 0; n < sagas_; ++n) {
    int64_t at = start + static_cast<int64_t>(world_.random().Below(busy_ms / 2));
    world_.At(at, [this, n] { Submit(n, 1); });
  }
  for (int64_t t = start; t < start + busy_ms;
       t += 200 + static_cast<int64_t>(world_.random().Below(3000)))
    world_.At(t, [this] { Operate(); });
  Disrupt(start + busy_ms);
}

void Workload::Submit(int n, int attempt) {
  const std::string key = "key-" + std::to_string(n);
  keys_.insert(key);
  Process* p = world_.AnyLive();
  if (!p) return Again(n, attempt);
  const SagaDefinition& def = world_.sagas()[static_cast<size_t>(n) % world_.sagas().size()];
  nlohmann::json input = InputFor(def, n);
  input["amount"] = (n * 397) % 2000;  // the same request every time
  // A traceparent of the seed's own (one drawn by sagad would not replay).
  char parent[64];
  snprintf(parent, sizeof parent, "00-%016llx%016llx-%016llx-01",
           static_cast<unsigned long long>(n + 1), static_cast<unsigned long long>(attempt),
           static_cast<unsigned long long>(n + 1));
  // Through the API, as a client does: a key, sometimes ?wait.
  static const double kWaits[] = {0, 0, 0.5, 2, 20};
  const double wait = kWaits[world_.random().Below(5)];
  std::string target = "/v1/sagas/" + def.name + "/instances";
  if (wait > 0) target += "?wait=" + std::to_string(wait);
  client_.Send(*p, "POST", target, {{"Idempotency-Key", key}, {"traceparent", parent}},
               {{"input", input}}, wait,
               [this, n, attempt](const ApiClient::Answer& a) { Submitted(n, attempt, a); });
}

void Workload::Again(int n, int attempt) {
  if (attempt < 200)
    world_.At(world_.now() + 200 + static_cast<int64_t>(world_.random().Below(2000)),
              [this, n, attempt] { Submit(n, attempt + 1); });
}

void Workload::Submitted(int n, int attempt, const ApiClient::Answer& a) {
  const std::string key = "key-" + std::to_string(n);
  const SagaDefinition& def = world_.sagas()[static_cast<size_t>(n) % world_.sagas().size()];
  if (a.status == 400 || a.status == 404 || a.status == 422)
    world_.Violation("submission of " + def.name + " refused: " + std::to_string(a.status) + " " +
                     a.body.dump());
  if (a.status != 200 && a.status != 201 && a.status != 202)  // closed, 409, 503: again
    return Again(n, attempt);
  std::string id = a.body.is_object() ? a.body.value("id", "") : "";
  const std::string location = a.Header("location");
  if (id.empty() && location.rfind("/v1/instances/", 0) == 0) id = location.substr(14);
  if (id.empty()) world_.Violation("submission of " + key + " answered without an id");
  auto known = id_of_.find(key);
  if (known != id_of_.end() && known->second != id)
    world_.Violation("key " + key + " answered with two instances: " + known->second + ", " + id);
  if (known == id_of_.end()) {
    id_of_[key] = id;
    ids_.push_back(id);
    ++answered_;
    SIM_TRACE(world_, "submitted " + key + " -> " + id);
  }
  if (attempt == 1 && world_.random().Chance(0.2))  // a client that sends it again
    world_.At(world_.now() + static_cast<int64_t>(world_.random().Below(5000)),
              [this, n] { Submit(n, 2); });
}

void Workload::Operate() {
  if (ids_.empty()) return;
  Process* p = world_.AnyLive();
  if (!p) return;
  // A copy: a client may add to ids_ while the action runs (a slow store
  // lets the world run meanwhile).
  const std::string id = ids_[world_.random().Below(ids_.size())];
  // What an operator sees (the stored snapshot: the view without the
  // annotations the API adds, which are not the engine's core).
  auto view = MemoryStore(world_.data()).GetInstance(id);
  if (view.ok()) ActOn(*p, id, *view);
}

void Workload::Tend() {
  MemoryStore store(world_.data());
  auto active = store.ListActive();
  if (!active.ok()) return;
  for (const ActiveInstance& a : *active) {
    if (a.status != "AWAITING_APPROVAL" && a.status != "NEEDS_REVIEW") continue;
    Process* p = world_.AnyLive();
    if (!p) return;
    auto view = store.GetInstance(a.id);
    if (view.ok()) ActOn(*p, a.id, *view);
  }
}

void Workload::ActOn(Process& p, const std::string& id, const nlohmann::json& view) {
  SeededRandom& r = world_.random();
  const bool quiet = world_.quiet();
  const std::string base = "/v1/instances/" + id;
  for (const auto& st : view.value("steps", nlohmann::json::array())) {
    const std::string name = st.value("name", ""), status = st.value("status", "");
    if (status == "AWAITING_APPROVAL") {
      const std::string step = base + "/steps/" + name;
      if (!quiet && r.Chance(0.2)) return Act(p, step + "/reject", {{"reason", "no"}});
      // Now and then by the bulk action (judged as the single one is).
      if (!quiet && r.Chance(0.25)) return Act(p, "/v1/instances/actions/approve", {{"ids", {id}}});
      // One that cannot be approved (a value its request needs is missing)
      // is rejected in the end.
      return Act(p, step + "/approve", nlohmann::json::object(),
                 [this, step, quiet](const ApiClient::Answer& a) {
                   Process* q = world_.AnyLive();
                   if (quiet && a.status == 409 && q)
                     Act(*q, step + "/reject", {{"reason", "cannot be approved"}});
                 });
    }
    if (status == "NEEDS_REVIEW" && r.Chance(0.5)) return Resolve(p, id, name);
  }
  if (quiet) return;
  switch (r.Below(6)) {
    case 0:
      return r.Chance(0.25) ? Act(p, "/v1/instances/actions/cancel", {{"ids", {id}}})
                            : Act(p, base + "/cancel", {{"reason", "changed my mind"}});
    case 1:
      return Act(p, base + "/compensate", {{"reason", "undo it"}});
    case 2:
      if (view.value("steps", nlohmann::json::array()).empty()) return;
      if (r.Chance(0.25)) return Act(p, "/v1/instances/actions/retry", {{"ids", {id}}});
      return Act(p, base + "/steps/" + view["steps"][0].value("name", "") + "/retry",
                 nlohmann::json::object());
    default:
      return;
  }
}

void Workload::Act(Process& p, const std::string& target, const nlohmann::json& body,
                   ApiClient::Done then) {
  client_.Send(p, "POST", target, {}, body, 0, [this, target, then](const ApiClient::Answer& a) {
    const std::string detail = a.body.is_object() ? a.body.value("detail", "") : "";
    SIM_TRACE(world_, "operator " + target + ": " + std::to_string(a.status) + " " + detail);
    if (then) then(a);
  });
}

void Workload::Resolve(Process& p, const std::string& id, const std::string& step) {
  const Operation* fwd = world_.downstreams().Find(StepKey(id, step));
  const Operation* comp = world_.downstreams().Find(CompensationKey(id, step));
  const Operation* truth = comp ? comp : fwd;
  if (truth && truth->pending > 0) return;  // not known yet: a human would wait
  // A request a paused process still holds: no service can tell, and no
  // guarantee covers an operator who answers "not executed" meanwhile (the
  // lease rule's remaining window); a careful one waits for the pause.
  for (const Operation* o : {fwd, comp})
    if (o && o->held > 0) return;
  for (const auto& q : world_.processes())
    if (q.paused_until > world_.now()) return;
  const bool done = truth && truth->effects > 0;
  // As a human would: with the reference the service gave.
  std::string ref = done ? truth->result.value("ref", "") : "";
  Act(p, "/v1/instances/" + id + "/steps/" + step + "/resolve",
      {{"outcome", done ? "committed" : "not_executed"},
       {"external_ref", ref},
       {"comment", "checked"}});
}

void Workload::Disrupt(int64_t until) {
  SeededRandom& r = world_.random();
  const Scenario& sc = world_.scenario();
  for (int64_t t = world_.now(); t < until; t += 500 + static_cast<int64_t>(r.Below(8000))) {
    const int proc = static_cast<int>(r.Below(world_.processes().size()));
    if (sc.crashes && r.Chance(0.6)) {
      world_.At(t, [this, proc] { world_.Crash(proc); });
    } else if (sc.pauses) {
      int64_t len = 1 + static_cast<int64_t>(r.Below(3 * sc.lease_ms));
      world_.At(t, [this, proc, len] {
        Process& p = world_.processes()[static_cast<size_t>(proc)];
        if (!p.alive) return;
        SIM_TRACE(world_,
                  "process " + std::to_string(proc) + " paused " + std::to_string(len) + " ms");
        p.paused_until = std::max(p.paused_until, world_.now() + len);
      });
    }
  }
}

}  // namespace sagad::sim

// sagactl's output: one-line errors, tables, instances, lists, events.
#include <algorithm>
#include <ctime>
#include <iostream>

#include "coordinator/cli/sagactl.h"
#include "util/json_limits.h"

namespace sagactl {

void Die(const std::string& msg, int code) {
  std::cerr << "sagactl: " << msg << "\n";
  std::exit(code);
}

std::string Time(int64_t ms) {
  if (ms <= 0) return "-";
  time_t t = ms / 1000;
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Str(const json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return j.get<std::string>().empty() ? "-" : j.get<std::string>();
  return sagad::DumpJson(j);
}

void Table(const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i)
      w[i] = std::max(w[i], std::min<size_t>(r[i].size(), 60));
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      std::string cell = r[i].size() > 60 ? r[i].substr(0, 57) + "..." : r[i];
      out += cell;
      if (i + 1 < r.size()) out += std::string(w[i] - cell.size() + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::cout << out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

namespace {

// A run's calls: each with its tool, arguments, status, who made it, and
// what came back or went wrong.
void PrintCalls(const json& run) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : run.value("calls", json::array())) {
    const json& result = c.value("result", json());
    std::string outcome = Str(c.value("last_error", json()));
    if (!result.is_null()) outcome = result.dump();
    rows.push_back({Str(c["call_id"]), Str(c.value("tool", json())),
                    c.value("arguments", json::object()).dump(), Str(c["status"]),
                    Str(c.value("by", json())), outcome.empty() ? "-" : outcome});
  }
  Table({"CALL", "TOOL", "ARGUMENTS", "STATUS", "BY", "RESULT / LAST ERROR"}, rows);
}

}  // namespace

void PrintInstance(const json& i) {
  std::cout << "instance   " << Str(i["id"]) << "\n"
            << "saga       " << Str(i["saga"]) << " v" << Str(i["saga_version"]) << "\n"
            << "status     " << Str(i["status"]);
  if (i.contains("waiting_for") && !i["waiting_for"].is_null())
    std::cout << " (waiting for " << Str(i["waiting_for"]) << ")";
  std::cout << "\n";
  if (i.contains("review_reason")) std::cout << "reason     " << Str(i["review_reason"]) << "\n";
  if (i.contains("current_steps") && i["current_steps"].is_array() && !i["current_steps"].empty()) {
    std::string cur;
    for (const auto& n : i["current_steps"]) cur += (cur.empty() ? "" : ", ") + Str(n);
    std::cout << "current    " << cur << "\n";
  } else if (i.contains("current_step")) {
    std::cout << "current    " << Str(i["current_step"]) << "\n";
  }
  if (i.contains("owner")) std::cout << "owner      " << Str(i["owner"]) << "\n";
  if (i.contains("idle_until"))
    std::cout << "idle until " << Time(i.value("idle_until", int64_t(0)))
              << " (waiting for its agent)\n";
  std::cout << "created    " << Time(i.value("created_at", int64_t(0))) << "   updated "
            << Time(i.value("updated_at", int64_t(0))) << "\n\n";
  if (i.value("kind", "") == "run") return PrintCalls(i);
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : i["steps"]) {
    std::string comp = s["compensation"].is_null() ? "-" : Str(s["compensation"]["status"]);
    // The graph: the steps each one runs after ("-": a root, runs at once).
    std::string after;
    if (s.contains("after") && s["after"].is_array())
      for (const auto& n : s["after"]) after += (after.empty() ? "" : ",") + Str(n);
    // What an operator did to the step shows beside its status.
    std::string status = Str(s["status"]);
    if (s.value("approved", false) && (status == "PLANNED" || status == "STARTED"))
      status += " (approved)";  // approved, not yet answered
    const json& resolution = s.value("resolution", json());
    if (resolution.is_object())
      status += " (resolved " + Str(resolution.value("outcome", json())) + ")";
    rows.push_back({Str(s["name"]), after.empty() ? "-" : after, status,
                    std::to_string(s.value("attempts", 0)), Str(s["external_ref"]), comp,
                    Str(s["last_error"])});
  }
  Table({"STEP", "AFTER", "STATUS", "ATTEMPTS", "REF", "COMPENSATION", "LAST ERROR"}, rows);
}

void PrintList(const json& instances, const json& next) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& i : instances)
    rows.push_back({Str(i["id"]), Str(i["saga"]), Str(i["status"]),
                    Str(i.value("waiting_for", json())), Str(i.value("current_step", json())),
                    Time(i.value("updated_at", int64_t(0)))});
  Table({"ID", "SAGA", "STATUS", "WAITING", "STEP", "UPDATED"}, rows);
  if (!next.is_null()) std::cout << "(more: --cursor " << Str(next) << ")\n";
}

void PrintEvents(const json& events) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : events) {
    std::string detail;
    if (e.contains("data"))
      for (const char* f : {"by", "reason", "external_ref", "error", "comment"})
        if (e["data"].contains(f) && !Str(e["data"][f]).empty() && Str(e["data"][f]) != "-")
          detail += std::string(detail.empty() ? "" : " ") + f + "=" + Str(e["data"][f]);
    rows.push_back({std::to_string(e.value("seq", 0)), Time(e.value("at", int64_t(0))),
                    Str(e["type"]), Str(e.value("step", json())), detail.empty() ? "-" : detail});
  }
  Table({"SEQ", "AT", "TYPE", "STEP", "DETAIL"}, rows);
}

}  // namespace sagactl

namespace sagactl {
namespace {

// The steps each step runs after: "after" when given (a graph), else the
// step before it (a list).
std::vector<std::vector<std::string>> Dependencies(const json& steps) {
  std::vector<std::vector<std::string>> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& after = steps[i].value("after", json());
    if (after.is_array())
      out.push_back(after.get<std::vector<std::string>>());
    else
      out.push_back(i > 0 ? std::vector<std::string>{Str(steps[i - 1]["name"])}
                          : std::vector<std::string>{});
  }
  return out;
}

// "name" plus what an operator must know of the step.
std::string StepLabel(const json& s, const std::string& newline) {
  std::string flags;
  // An irreversible step waits for an operator's approval (policies/).
  if (s.value("requires_approval", false) || s.value("irreversible", false)) flags += "approval";
  if (s.value("irreversible", false))
    flags += std::string(flags.empty() ? "" : ", ") + "irreversible";
  if (s.value("compensation", json()).is_null() && !s.value("irreversible", false))
    flags += std::string(flags.empty() ? "" : ", ") + "no undo";
  return Str(s["name"]) + (flags.empty() ? "" : newline + "(" + flags + ")");
}

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string GraphDot(const json& def) {
  const json& steps = def["steps"];
  auto deps = Dependencies(steps);
  std::string out = "digraph " + Quoted(Str(def["name"]) + " v" + Str(def["version"])) +
                    " {\n  rankdir=TB;\n  node [shape=box, style=rounded];\n";
  for (const auto& s : steps)
    out += "  " + Quoted(Str(s["name"])) + " [label=" + Quoted(StepLabel(s, "\\n")) + "];\n";
  for (size_t i = 0; i < steps.size(); ++i)
    for (const auto& d : deps[i])
      out += "  " + Quoted(d) + " -> " + Quoted(Str(steps[i]["name"])) + ";\n";
  return out + "}\n";
}

std::string GraphMermaid(const json& def) {
  const json& steps = def["steps"];
  auto deps = Dependencies(steps);
  std::map<std::string, std::string> id;
  std::string out = "flowchart TD\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    id[Str(steps[i]["name"])] = "s" + std::to_string(i);
    std::string label = StepLabel(steps[i], "<br/>");
    for (auto& c : label)
      if (c == '"') c = '\'';
    out += "  s" + std::to_string(i) + "[\"" + label + "\"]\n";
  }
  for (size_t i = 0; i < steps.size(); ++i)
    for (const auto& d : deps[i])
      if (id.count(d)) out += "  " + id[d] + " --> s" + std::to_string(i) + "\n";
  return out;
}

}  // namespace sagactl

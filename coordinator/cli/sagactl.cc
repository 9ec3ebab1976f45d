// sagactl: the command-line client of sagad.
//
//   sagactl [--url URL] [--token TOKEN] [--ca FILE] [--json] COMMAND ...
//   URL and TOKEN default to $SAGAD_URL (else http://127.0.0.1:8080) and $SAGAD_TOKEN;
//   FILE (a CA bundle for an https:// URL) to $SAGAD_CA_FILE.
//
//   submit SAGA --input JSON [--wait SECONDS] [--key IDEMPOTENCY_KEY]
//   list [--status S] [--saga NAME] [--waiting approval|retry|review] [--limit N] [--cursor C]
//        [--key IDEMPOTENCY_KEY] [--where INPUT_FIELD=VALUE]
//   show ID | events ID | bundle ID | approvals
//   approve ID STEP [--comment C]      reject ID STEP [--reason R]
//   resolve ID STEP --outcome committed|not_executed [--ref REF] [--comment C]
//   retry ID STEP [--comment C]        skip ID STEP --result JSON [--ref REF] [--comment C]
//   cancel ID [--reason R]             compensate ID [--reason R]
//   services                           pause SERVICE [--reason R]    resume SERVICE
//   deploy FILE                        a JSON saga or toolbox definition, as its name and version
//   graph SAGA[@VERSION] [--format dot|mermaid]   the saga's steps as a graph (newest version)
//   inspect --data-dir DIR|--store URL [ID]   read a store directly
//   verify --data-dir DIR|--store URL         replay every instance's log, compare with its
//   snapshot export --data-dir DIR|--store URL [--finished-before MS]   instances + events as JSON
//   lines hash-token [TOKEN]                 the token_sha256 to put in the config (TOKEN or stdin)
//
// Every command over HTTP goes through sagad::Client (coordinator/client/).
// Tables by default, the server's JSON with --json. Exit 0 on success, 1 on a
// refused request or unreachable server, 2 on bad usage; errors are one line.
#include "coordinator/cli/sagactl.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/sha256.h"
#include "coordinator/client/client.h"
#include "sagas/template.h"
#include "util/json_limits.h"

namespace sagactl {
namespace {

constexpr const char* kUsage =
    "usage: sagactl [--url URL] [--token TOKEN] [--ca FILE] [--json] COMMAND ...\n"
    "commands: submit SAGA --input JSON [--wait S] [--key K] | list [--status S] [--saga N]\n"
    "  [--waiting W] [--limit N] [--cursor C] [--key K] [--where FIELD=VALUE] | show ID |\n"
    "  events ID | bundle ID | receipt ID | verify-receipt FILE | approvals |\n"
    "  approve ID STEP [--comment C] | reject ID STEP [--reason R] |\n"
    "  resolve ID STEP --outcome committed|not_executed [--ref R] [--comment C] |\n"
    "  retry ID STEP | skip ID STEP --result JSON [--ref R] | cancel ID [--reason R] |\n"
    "  compensate ID [--reason R] | services | pause SERVICE [--reason R] | resume SERVICE |\n"
    "  deploy FILE | graph SAGA[@VERSION] [--format dot|mermaid] |\n"
    "  inspect --data-dir DIR|--store URL [ID] |\n"
    "  verify --data-dir DIR|--store URL | export --data-dir DIR|--store URL\n"
    "  [--finished-before MS] | hash-token [TOKEN]";

using sagad::Client;

// The server's answer, or a one-line error and exit 1 (a refused request, an
// unreachable server).
json Must(sagad::StatusOr<json> r) {
  if (!r.ok()) Die(r.status().message());
  return std::move(r).value();
}

json ParseJsonArg(const std::string& flag, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) Die(flag + " must be a JSON object", 2);
  return j;
}

// One path segment from a user's word: percent-encoded; "", "." and ".."
// refused (they would name another path).
std::string Segment(const std::string& word) {
  if (!sagad::PathSegment(word).ok())
    Die("'" + word + "' is not a valid instance, saga or step name", 2);
  return word;
}

// A whole number from 0 to 1,000,000 in `text`, or bad usage naming `what`.
int Count(const std::string& text, const std::string& what) {
  char* end = nullptr;
  long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < 0 || n > 1000000) Die(what + " must be a number", 2);
  return static_cast<int>(n);
}

int IntFlag(const Args& a, const std::string& flag, int def) {
  return a.Has(flag) ? Count(a.Get(flag), "--" + flag) : def;
}

std::string Need(const Args& a, size_t i, const char* what) {
  if (a.positional.size() <= i) Die(std::string("missing ") + what + "\n" + kUsage, 2);
  return a.positional[i];
}

// False when it printed the usage (--help).
bool ParseArgs(int argc, char** argv, Args* a, bool* as_json) {
  static const std::map<std::string, bool> kFlags = {
      // flag -> takes a value
      {"url", true},      {"token", true},   {"json", false},  {"input", true},
      {"wait", true},     {"key", true},     {"status", true}, {"saga", true},
      {"waiting", true},  {"limit", true},   {"cursor", true}, {"comment", true},
      {"reason", true},   {"outcome", true}, {"ref", true},    {"result", true},
      {"data-dir", true}, {"store", true},   {"ca", true},     {"finished-before", true},
      {"where", true},    {"format", true}};
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-h" || s == "--help") {
      std::cout << kUsage << "\n";
      return false;
    }
    if (s.rfind("--", 0) != 0) {
      a->positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2);
    auto f = kFlags.find(name);
    if (f == kFlags.end()) Die("unknown flag " + s + "\n" + kUsage, 2);
    if (!f->second) {
      if (name == "json") *as_json = true;
      continue;
    }
    if (i + 1 >= argc) Die("flag " + s + " needs a value", 2);
    a->flags[name] = argv[++i];
  }
  if (a->positional.empty()) Die(std::string("no command\n") + kUsage, 2);
  return true;
}

// For "token_sha256" in the config: no secret in the file.
int HashToken(const Args& a) {
  std::string token = a.positional.size() > 1 ? a.positional[1] : "";
  if (token.empty() && !std::getline(std::cin, token))
    Die("hash-token needs TOKEN (or one line on stdin)", 2);
  if (token.empty()) Die("the token is empty", 2);
  std::cout << sagad::Sha256Hex(token) << "\n";
  return 0;
}

Client ClientFromArgs(const Args& a) {
  const char* env_url = std::getenv("SAGAD_URL");
  const char* env_token = std::getenv("SAGAD_TOKEN");
  std::string url = a.Get("url", env_url ? env_url : "http://127.0.0.1:8080");
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    Die("--url must start with http:// or https://, got '" + url + "'", 2);
  const char* env_ca = std::getenv("SAGAD_CA_FILE");
  sagad::ClientOptions o;
  o.url = url;
  o.token = a.Get("token", env_token ? env_token : "");
  o.ca_file = a.Get("ca", env_ca ? env_ca : "");
  return Client(o);
}

std::string Id(const Args& a, size_t i) { return Segment(Need(a, i, "instance id")); }

// submit, list, show, events, bundle, approvals; false for another command.
bool ReadCommand(const std::string& cmd, const Args& a, Client& c, bool* as_json, json* out) {
  if (cmd == "submit") {
    std::string saga = Segment(Need(a, 1, "saga name"));
    if (!a.Has("input")) Die("submit needs --input JSON", 2);
    *out = Must(c.Submit(saga, ParseJsonArg("--input", a.Get("input")), a.Get("key"),
                         IntFlag(a, "wait", 0)));
    if (!*as_json) PrintInstance(*out);
  } else if (cmd == "list") {
    sagad::ListQuery q;
    q.limit = IntFlag(a, "limit", 50);
    q.status = a.Get("status");
    q.saga = a.Get("saga");
    q.waiting = a.Get("waiting");
    q.cursor = a.Get("cursor");
    q.idempotency_key = a.Get("key");
    if (a.Has("where")) {  // FIELD=VALUE: a top-level input field
      std::string w = a.Get("where");
      size_t eq = w.find('=');
      if (eq == std::string::npos || eq == 0) Die("--where must be FIELD=VALUE", 2);
      q.input[w.substr(0, eq)] = w.substr(eq + 1);
    }
    *out = Must(c.List(q));
    if (!*as_json) PrintList((*out)["instances"], (*out)["next_cursor"]);
  } else if (cmd == "show") {
    *out = Must(c.Get(Id(a, 1)));
    if (!*as_json) PrintInstance(*out);
  } else if (cmd == "events") {
    *out = Must(c.Events(Id(a, 1)));
    if (!*as_json) PrintEvents((*out)["events"]);
  } else if (cmd == "bundle" || cmd == "receipt") {
    *out = Must(cmd == "bundle" ? c.Bundle(Id(a, 1)) : c.Receipt(Id(a, 1)));
    *as_json = true;  // a document for humans and tools alike
  } else if (cmd == "approvals") {
    *out = Must(c.Approvals());
    if (*as_json) return true;
    std::vector<std::vector<std::string>> rows;
    // A run's call shows its tool; every request its body's SHA-256 (what
    // the approval is bound to), in full: compare it with the console's.
    for (const auto& x : (*out)["approvals"]) {
      const json call = x.value("call", json::object());
      const json req = x.value("request", json::object());
      rows.push_back({Str(x["instance_id"]), Str(x["saga"]), Str(x["step"]),
                      call.is_object() ? call.value("tool", "-") : "-",
                      Time(x.value("since", int64_t(0))),
                      req.is_object() ? req.value("body_sha256", "-") : "-"});
    }
    Table({"INSTANCE", "SAGA", "STEP", "TOOL", "SINCE", "BODY SHA-256"}, rows);
  } else {
    return false;
  }
  return true;
}

// The past tense of an action, as the first line of its answer.
std::string Done(const std::string& cmd) {
  static const std::map<std::string, std::string> kDone = {
      {"approve", "approved"},
      {"reject", "rejected"},
      {"resolve", "resolved"},
      {"retry", "retried"},
      {"skip", "skipped"},
      {"cancel", "cancelled"},
      {"compensate", "compensation forced for"}};
  auto it = kDone.find(cmd);
  return it == kDone.end() ? cmd : it->second;
}

// approve, reject, resolve, retry, skip, cancel, compensate; false for
// another command.
bool ActionCommand(const std::string& cmd, const Args& a, Client& c, json* out) {
  const std::string comment = a.Get("comment"), reason = a.Get("reason"), ref = a.Get("ref");
  if (cmd == "approve" || cmd == "reject" || cmd == "resolve" || cmd == "retry" || cmd == "skip") {
    const std::string id = Id(a, 1), step = Segment(Need(a, 2, "step name"));
    if (cmd == "resolve" && !a.Has("outcome"))
      Die("resolve needs --outcome committed|not_executed", 2);
    if (cmd == "skip" && !a.Has("result")) Die("skip needs --result JSON", 2);
    *out = Must(cmd == "approve"   ? c.Approve(id, step, comment)
                : cmd == "reject"  ? c.Reject(id, step, reason)
                : cmd == "resolve" ? c.Resolve(id, step, a.Get("outcome"), ref, comment)
                : cmd == "retry"
                    ? c.Retry(id, step, comment)
                    : c.Skip(id, step, ParseJsonArg("--result", a.Get("result")), ref, comment));
  } else if (cmd == "cancel" || cmd == "compensate") {
    *out = Must(cmd == "cancel" ? c.Cancel(Id(a, 1), reason) : c.Compensate(Id(a, 1), reason));
  } else {
    return false;
  }
  return true;
}

// deploy FILE: the JSON definition in FILE (its "name" and "version" say
// where); false for another command.
bool DeployCommand(const std::string& cmd, const Args& a, Client& c, bool as_json, json* out) {
  if (cmd != "deploy") return false;
  const std::string file = Need(a, 1, "definition file");
  std::ifstream in(file);
  if (!in) Die("cannot read " + file, 2);
  std::stringstream text;
  text << in.rdbuf();
  json def = json::parse(text.str(), nullptr, false);
  if (def.is_discarded() || !def.is_object()) Die(file + " is not a JSON object", 2);
  if (!def.contains("name") || !def["name"].is_string() || !def.contains("version") ||
      !def["version"].is_number_integer())
    Die(file + " needs \"name\" (a string) and \"version\" (an integer)", 2);
  const std::string name = Segment(def["name"]);
  const std::string version = std::to_string(def["version"].get<int64_t>());
  *out = Must(c.Deploy(def));
  const bool toolbox = def.value("kind", json()) == "toolbox";
  if (!as_json)
    std::cout << (toolbox ? "toolbox " : "saga ") << name << " version " << version
              << " deployed\n";
  return true;
}

// services, pause NAME, resume NAME; false for another command.
bool ServiceCommand(const std::string& cmd, const Args& a, Client& c, bool as_json, json* out) {
  if (cmd == "services") {
    *out = Must(c.Services());
  } else if (cmd == "pause" || cmd == "resume") {
    const std::string name = Segment(Need(a, 1, "service name"));
    *out = Must(cmd == "pause" ? c.PauseService(name, a.Get("reason")) : c.ResumeService(name));
  } else {
    return false;
  }
  if (as_json) return true;
  json list = out->contains("services") ? (*out)["services"] : json::array({*out});
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : list) {
    // A pause says who, since when and why: "paused by ann since 10:02 (why)".
    std::string state = s.value("paused", false) ? "paused" : "open";
    const json& p = s.value("pause", json());
    if (p.is_object()) {
      state += " by " + Str(p.value("by", json())) + " since " + Time(p.value("since", int64_t(0)));
      if (!Str(p.value("reason", json())).empty()) state += " (" + Str(p["reason"]) + ")";
    }
    rows.push_back({Str(s["name"]), state, Str(s["max_in_flight"]), Str(s["max_per_second"]),
                    std::to_string(s.value("in_flight", 0)), std::to_string(s.value("queued", 0))});
  }
  Table({"SERVICE", "STATE", "MAX IN FLIGHT", "MAX/S", "IN FLIGHT", "QUEUED"}, rows);
  return true;
}

// graph SAGA[@VERSION] [--format dot|mermaid]: the newest registered
// version unless one is named; false for another command.
bool GraphCommand(const std::string& cmd, const Args& a, Client& c, bool as_json, json* out) {
  if (cmd != "graph") return false;
  std::string name = Need(a, 1, "saga name");
  const std::string format = a.Get("format", "dot");
  if (format != "dot" && format != "mermaid") Die("--format must be dot or mermaid", 2);
  int version = 0;
  size_t at = name.rfind('@');
  if (at != std::string::npos) {
    version = Count(name.substr(at + 1), "the version after @");
    name = name.substr(0, at);
  }
  Segment(name);
  if (version == 0) {
    const json sagas = Must(c.Sagas());  // kept: the loop walks a member of it
    for (const auto& d : sagas["sagas"])
      if (d.value("name", "") == name) version = std::max(version, d.value("version", 0));
    if (version == 0) Die("404 Not Found: no saga '" + name + "' is registered");
  }
  *out = Must(c.Definition(name, version));
  if (!as_json) std::cout << (format == "dot" ? GraphDot(*out) : GraphMermaid(*out));
  return true;
}

int Main(int argc, char** argv) {
  Args a;
  bool as_json = false;
  if (!ParseArgs(argc, argv, &a, &as_json)) return 0;
  const std::string cmd = a.positional[0];
  if (cmd == "hash-token") return HashToken(a);
  if (cmd == "inspect") return Inspect(a, as_json);
  if (cmd == "export") return Export(a);
  if (cmd == "verify") return Verify(a);
  if (cmd == "verify-receipt") return VerifyReceiptFile(a);
  Client c = ClientFromArgs(a);
  json out;
  if (ActionCommand(cmd, a, c, &out)) {
    // The answer is the instance as the action left it (committed with it);
    // say first what was done, so that it is never read as the state before.
    if (!as_json) {
      const auto& p = a.positional;
      std::cout << Done(cmd) << (p.size() > 2 ? " " + p[2] + " of" : std::string()) << " " << p[1]
                << "\n";
      PrintInstance(out);
    }
  } else if (ServiceCommand(cmd, a, c, as_json, &out) || DeployCommand(cmd, a, c, as_json, &out) ||
             GraphCommand(cmd, a, c, as_json, &out)) {
  } else if (!ReadCommand(cmd, a, c, &as_json, &out)) {
    Die("unknown command '" + cmd + "'\n" + kUsage, 2);
  }
  if (as_json) std::cout << sagad::DumpJson(out, 2) << "\n";
  return 0;
}

}  // namespace
}  // namespace sagactl

// Any exception (a library's refusal) is one line on stderr, never an abort.
int main(int argc, char** argv) {
  try {
    return sagactl::Main(argc, argv);
  } catch (const std::exception& e) {
    sagactl::Die(std::string("error: ") + e.what());
  }
}

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
//   deploy FILE                        a JSON saga definition, as its name and version
//   inspect --data-dir DIR|--store URL [ID]   read a store directly
//   verify --data-dir DIR|--store URL         replay every instance's log, compare with its
//   snapshot export --data-dir DIR|--store URL [--finished-before MS]   instances + events as JSON
//   lines hash-token [TOKEN]                 the token_sha256 to put in the config (TOKEN or stdin)
//
// Tables by default, the server's JSON with --json. Exit 0 on success, 1 on a
// refused request or unreachable server, 2 on bad usage; errors are one line.
#include "coordinator/cli/sagactl.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/sha256.h"
#include "sagas/template.h"
#include "util/json_limits.h"

namespace sagactl {
namespace {

constexpr const char* kUsage =
    "usage: sagactl [--url URL] [--token TOKEN] [--ca FILE] [--json] COMMAND ...\n"
    "commands: submit SAGA --input JSON [--wait S] [--key K] | list [--status S] [--saga N]\n"
    "  [--waiting W] [--limit N] [--cursor C] [--key K] [--where FIELD=VALUE] | show ID |\n"
    "  events ID | bundle ID | approvals |\n"
    "  approve ID STEP [--comment C] | reject ID STEP [--reason R] |\n"
    "  resolve ID STEP --outcome committed|not_executed [--ref R] [--comment C] |\n"
    "  retry ID STEP | skip ID STEP --result JSON [--ref R] | cancel ID [--reason R] |\n"
    "  compensate ID [--reason R] | services | pause SERVICE [--reason R] | resume SERVICE |\n"
    "  deploy FILE |\n"
    "  inspect --data-dir DIR|--store URL [ID] |\n"
    "  verify --data-dir DIR|--store URL | export --data-dir DIR|--store URL\n"
    "  [--finished-before MS] | hash-token [TOKEN]";

class Client {
 public:
  Client(std::string url, std::string token, std::string ca)
      : url_(std::move(url)), token_(std::move(token)), ca_(std::move(ca)) {}

  json Call(const std::string& method, const std::string& path, const json& body = nullptr,
            std::map<std::string, std::string> headers = {}) {
    httplib::Client cli(url_);
    if (!ca_.empty()) cli.set_ca_cert_path(ca_);  // https:// with a private CA
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(330, 0);
    httplib::Request req;
    req.method = method;
    req.path = path;
    if (!token_.empty()) req.headers.emplace("Authorization", "Bearer " + token_);
    for (const auto& [k, v] : headers) req.headers.emplace(k, v);
    if (!body.is_null()) {
      req.body = sagad::DumpJson(body);
      req.headers.emplace("Content-Type", "application/json");
    }
    auto res = cli.send(req);
    if (!res) Die("cannot reach sagad at " + url_ + " (" + httplib::to_string(res.error()) + ")");
    json j = json::parse(res->body, nullptr, false);
    if (res->status >= 400) {
      std::string detail = j.is_object() ? j.value("detail", res->body) : res->body;
      std::string title = j.is_object() ? j.value("title", "") : "";
      Die(std::to_string(res->status) + (title.empty() ? "" : " " + title) + ": " + detail);
    }
    if (j.is_discarded()) Die("sagad answered something that is not JSON");
    return j;
  }

 private:
  std::string url_, token_, ca_;
};

json ParseJsonArg(const std::string& flag, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) Die(flag + " must be a JSON object", 2);
  return j;
}

// One path segment from a user's word: percent-encoded; "", "." and ".."
// refused (they would name another path).
std::string Segment(const std::string& word) {
  if (word.empty() || word == "." || word == "..")
    Die("'" + word + "' is not a valid instance, saga or step name", 2);
  return sagad::PercentEncode(word);
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
      {"where", true}};
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
  return Client(url, a.Get("token", env_token ? env_token : ""), a.Get("ca", env_ca ? env_ca : ""));
}

std::string InstancePath(const Args& a, size_t i) {
  return "/v1/instances/" + Segment(Need(a, i, "instance id"));
}

// submit, list, show, events, bundle, approvals; false for another command.
bool ReadCommand(const std::string& cmd, const Args& a, Client& c, bool* as_json, json* out) {
  if (cmd == "submit") {
    std::string saga = Need(a, 1, "saga name");
    if (!a.Has("input")) Die("submit needs --input JSON", 2);
    std::string path = "/v1/sagas/" + Segment(saga) + "/instances";
    if (a.Has("wait")) path += "?wait=" + sagad::PercentEncode(a.Get("wait"));
    std::map<std::string, std::string> h;
    if (a.Has("key")) h["Idempotency-Key"] = a.Get("key");
    *out = c.Call("POST", path, {{"input", ParseJsonArg("--input", a.Get("input"))}}, h);
    if (!*as_json) PrintInstance(*out);
  } else if (cmd == "list") {
    std::string q = "?limit=" + sagad::PercentEncode(a.Get("limit", "50"));
    for (const char* f : {"status", "saga", "waiting", "cursor"})
      if (a.Has(f)) q += std::string("&") + f + "=" + sagad::PercentEncode(a.Get(f));
    if (a.Has("key")) q += "&idempotency_key=" + sagad::PercentEncode(a.Get("key"));
    if (a.Has("where")) {  // FIELD=VALUE: a top-level input field
      std::string w = a.Get("where");
      size_t eq = w.find('=');
      if (eq == std::string::npos || eq == 0) Die("--where must be FIELD=VALUE", 2);
      q += "&input." + sagad::PercentEncode(w.substr(0, eq)) + "=" +
           sagad::PercentEncode(w.substr(eq + 1));
    }
    *out = c.Call("GET", "/v1/instances" + q);
    if (!*as_json) PrintList((*out)["instances"], (*out)["next_cursor"]);
  } else if (cmd == "show") {
    *out = c.Call("GET", InstancePath(a, 1));
    if (!*as_json) PrintInstance(*out);
  } else if (cmd == "events") {
    *out = c.Call("GET", InstancePath(a, 1) + "/events");
    if (!*as_json) PrintEvents((*out)["events"]);
  } else if (cmd == "bundle") {
    *out = c.Call("GET", InstancePath(a, 1) + "/bundle");
    *as_json = true;  // the bundle is a document for humans and tools alike
  } else if (cmd == "approvals") {
    *out = c.Call("GET", "/v1/approvals");
    if (*as_json) return true;
    std::vector<std::vector<std::string>> rows;
    for (const auto& x : (*out)["approvals"])
      rows.push_back({Str(x["instance_id"]), Str(x["saga"]), Str(x["step"]),
                      Time(x.value("since", int64_t(0)))});
    Table({"INSTANCE", "SAGA", "STEP", "SINCE"}, rows);
  } else {
    return false;
  }
  return true;
}

// approve, reject, resolve, retry, skip, cancel, compensate; false for
// another command.
bool ActionCommand(const std::string& cmd, const Args& a, Client& c, json* out) {
  json body = json::object();
  if (cmd == "approve" || cmd == "reject" || cmd == "resolve" || cmd == "retry" || cmd == "skip") {
    std::string path =
        InstancePath(a, 1) + "/steps/" + Segment(Need(a, 2, "step name")) + "/" + cmd;
    for (const char* f : {"comment", "reason", "outcome"})
      if (a.Has(f)) body[f] = a.Get(f);
    if (a.Has("ref")) body["external_ref"] = a.Get("ref");
    if (cmd == "resolve" && !a.Has("outcome"))
      Die("resolve needs --outcome committed|not_executed", 2);
    if (cmd == "skip") {
      if (!a.Has("result")) Die("skip needs --result JSON", 2);
      body["result"] = ParseJsonArg("--result", a.Get("result"));
    }
    *out = c.Call("POST", path, body);
  } else if (cmd == "cancel" || cmd == "compensate") {
    if (a.Has("reason")) body["reason"] = a.Get("reason");
    *out = c.Call("POST", InstancePath(a, 1) + "/" + cmd, body);
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
  const std::string name = def["name"];
  const std::string version = std::to_string(def["version"].get<int64_t>());
  *out = c.Call("PUT", "/v1/sagas/" + Segment(name) + "/versions/" + Segment(version), def);
  if (!as_json) std::cout << "saga " << name << " version " << version << " deployed\n";
  return true;
}

// services, pause NAME, resume NAME; false for another command.
bool ServiceCommand(const std::string& cmd, const Args& a, Client& c, bool as_json, json* out) {
  if (cmd == "services") {
    *out = c.Call("GET", "/v1/services");
  } else if (cmd == "pause" || cmd == "resume") {
    json body = json::object();
    if (a.Has("reason")) body["reason"] = a.Get("reason");
    *out = c.Call("POST", "/v1/services/" + Segment(Need(a, 1, "service name")) + "/" + cmd, body);
  } else {
    return false;
  }
  if (as_json) return true;
  json list = out->contains("services") ? (*out)["services"] : json::array({*out});
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : list)
    rows.push_back({Str(s["name"]), s.value("paused", false) ? "paused" : "open",
                    Str(s["max_in_flight"]), Str(s["max_per_second"]),
                    std::to_string(s.value("in_flight", 0)), std::to_string(s.value("queued", 0))});
  Table({"SERVICE", "STATE", "MAX IN FLIGHT", "MAX/S", "IN FLIGHT", "QUEUED"}, rows);
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
  Client c = ClientFromArgs(a);
  json out;
  if (ActionCommand(cmd, a, c, &out)) {
    if (!as_json) PrintInstance(out);
  } else if (ServiceCommand(cmd, a, c, as_json, &out) || DeployCommand(cmd, a, c, as_json, &out)) {
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

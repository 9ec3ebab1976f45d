// sagactl: the command-line client of sagad.
//
//   sagactl [--url URL] [--token TOKEN] [--ca FILE] [--json] COMMAND ...
//   URL and TOKEN default to $SAGAD_URL (else http://127.0.0.1:8080) and $SAGAD_TOKEN;
//   FILE (a CA bundle for an https:// URL) to $SAGAD_CA_FILE.
//
//   submit SAGA --input JSON [--wait SECONDS] [--key IDEMPOTENCY_KEY]
//   list [--status S] [--saga NAME] [--waiting approval|retry|review] [--limit N] [--cursor C]
//   show ID | events ID | bundle ID | approvals
//   approve ID STEP [--comment C]      reject ID STEP [--reason R]
//   resolve ID STEP --outcome committed|not_executed [--ref REF] [--comment C]
//   retry ID STEP [--comment C]        skip ID STEP --result JSON [--ref REF] [--comment C]
//   cancel ID [--reason R]             compensate ID [--reason R]
//   inspect --data-dir DIR|--store URL [ID]   read a store directly
//   verify --data-dir DIR|--store URL         replay every instance's log, compare with its
//   snapshot export --data-dir DIR|--store URL [--finished-before MS]   instances + events as JSON
//   lines hash-token [TOKEN]                 the token_sha256 to put in the config (TOKEN or stdin)
//
// Tables by default, the server's JSON with --json. Exit 0 on success, 1 on a
// refused request or unreachable server, 2 on bad usage; errors are one line.
#include <httplib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "adapters/sha256.h"
#include "coordinator/store/lmdb/lmdb_store.h"
#include "coordinator/store/postgres/postgres_store.h"
#include "sagas/template.h"
#include "util/json_limits.h"

namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: sagactl [--url URL] [--token TOKEN] [--ca FILE] [--json] COMMAND ...\n"
    "commands: submit SAGA --input JSON [--wait S] [--key K] | list [--status S] [--saga N]\n"
    "  [--waiting W] [--limit N] [--cursor C] | show ID | events ID | bundle ID | approvals |\n"
    "  approve ID STEP [--comment C] | reject ID STEP [--reason R] |\n"
    "  resolve ID STEP --outcome committed|not_executed [--ref R] [--comment C] |\n"
    "  retry ID STEP | skip ID STEP --result JSON [--ref R] | cancel ID [--reason R] |\n"
    "  compensate ID [--reason R] | inspect --data-dir DIR|--store URL [ID] |\n"
    "  verify --data-dir DIR|--store URL | export --data-dir DIR|--store URL\n"
    "  [--finished-before MS] | hash-token [TOKEN]";

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  bool Has(const std::string& f) const { return flags.count(f) > 0; }
  std::string Get(const std::string& f, const std::string& def = "") const {
    auto it = flags.find(f);
    return it == flags.end() ? def : it->second;
  }
};

[[noreturn]] void Die(const std::string& msg, int code = 1) {
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
  std::cout << "created    " << Time(i.value("created_at", int64_t(0))) << "   updated "
            << Time(i.value("updated_at", int64_t(0))) << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : i["steps"]) {
    std::string comp = s["compensation"].is_null() ? "-" : Str(s["compensation"]["status"]);
    // The graph: the steps each one runs after ("-": a root, runs at once).
    std::string after;
    if (s.contains("after") && s["after"].is_array())
      for (const auto& n : s["after"]) after += (after.empty() ? "" : ",") + Str(n);
    rows.push_back({Str(s["name"]), after.empty() ? "-" : after, Str(s["status"]),
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

// Replays every instance's event log and compares it with the stored
// snapshot; prints each mismatch. Exit 1 if there is any.
// Opens the store of an existing data dir (or the PostgreSQL store of
// --store URL); never creates a data dir (a mistyped path must not look like
// an empty store).
std::unique_ptr<sagad::Store> OpenExisting(const Args& a) {
  if (a.Has("store")) {
    if (!sagad::IsPostgresUri(a.Get("store"))) Die("--store must be a postgresql:// URI", 2);
    auto pg = sagad::PostgresStore::Open(a.Get("store"), 2);
    if (!pg.ok()) Die(pg.status().message());
    return std::move(*pg);
  }
  std::string dir = a.Get("data-dir");
  if (dir.empty()) Die("needs --data-dir DIR or --store URL", 2);
  struct stat st;
  if (stat((dir + "/data.mdb").c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    Die("no sagad data dir at " + dir + " (no data.mdb there)");
  auto store = sagad::LmdbStore::OpenReadOnly(dir);
  if (!store.ok()) Die(store.status().message());
  return std::move(*store);
}

int Verify(const Args& a) {
  auto store = OpenExisting(a);
  int checked = 0, mismatches = 0;
  std::string cursor;
  do {
    auto page = store->ListInstances({}, 500, cursor);
    if (!page.ok()) Die(page.status().message());
    for (const json& snap : page->instances) {
      std::string id = snap.value("id", "");
      ++checked;
      auto events = store->GetEvents(id);
      if (!events.ok()) Die(events.status().message());
      auto inst = sagad::Instance::Replay(id, *events);
      if (!inst.ok()) {
        ++mismatches;
        std::cout << id << ": the event log does not replay: " << inst.status().message() << "\n";
        continue;
      }
      inst->set_version(snap.value("version", uint64_t(0)));
      json replayed = inst->ToJson();
      if (replayed == snap) continue;
      ++mismatches;
      std::cout << id << ": snapshot differs from the replayed log:";
      for (const auto& [k, v] : replayed.items())
        if (!snap.contains(k) || snap[k] != v) std::cout << " " << k;
      for (const auto& [k, v] : snap.items())
        if (!replayed.contains(k)) std::cout << " " << k;
      std::cout << "\n";
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  std::cout << checked << " instances checked, " << mismatches << " mismatches\n";
  return mismatches == 0 ? 0 : 1;
}

// Writes instances with their events as JSON lines ({"instance", "events"}),
// for archives before retention deletes them: every instance, or with
// --finished-before MS only those that finished (COMPLETED, COMPENSATED)
// before that time (ms since the epoch).
int Export(const Args& a) {
  int64_t before = -1;
  if (a.Has("finished-before")) {
    const std::string t = a.Get("finished-before");
    if (t.empty() || t.size() > 15 || t.find_first_not_of("0123456789") != std::string::npos)
      Die("--finished-before must be a time in ms since the epoch", 2);
    before = std::stoll(t);
  }
  auto store = OpenExisting(a);
  std::string cursor;
  size_t written = 0;
  do {
    auto page = store->ListInstances({}, 500, cursor);
    if (!page.ok()) Die(page.status().message());
    for (const json& snap : page->instances) {
      std::string status = snap.value("status", "");
      if (before >= 0 && !((status == "COMPLETED" || status == "COMPENSATED") &&
                           snap.value("updated_at", int64_t(0)) < before))
        continue;
      auto events = store->GetEvents(snap.value("id", ""));
      if (!events.ok()) Die(events.status().message());
      json evs = json::array();
      for (const auto& e : *events) evs.push_back(e.ToJson());
      std::cout << sagad::DumpJson({{"instance", snap}, {"events", evs}}) << "\n";
      ++written;
    }
    cursor = page->next_cursor;
  } while (!cursor.empty());
  std::cerr << written << " instances exported\n";
  return 0;
}

size_t Count(const std::string& text, const std::string& flag) {
  if (text.empty() || text.size() > 9 ||
      text.find_first_not_of("0123456789") != std::string::npos || std::stoul(text) == 0)
    Die(flag + " must be a positive whole number", 2);
  return std::stoul(text);
}

int Inspect(const Args& a, bool as_json) {
  auto store = OpenExisting(a);
  if (a.positional.size() > 1) {
    auto inst = store->GetInstance(a.positional[1]);
    if (!inst.ok()) Die(inst.status().message());
    if (as_json) {
      std::cout << sagad::DumpJson(*inst, 2) << "\n";
    } else {
      PrintInstance(*inst);
      auto ev = store->GetEvents(a.positional[1]);
      if (ev.ok()) {
        json arr = json::array();
        for (const auto& e : *ev) arr.push_back(e.ToJson());
        std::cout << "\n";
        PrintEvents(arr);
      }
    }
    return 0;
  }
  auto page = store->ListInstances({a.Get("status"), a.Get("saga"), a.Get("waiting")},
                                   Count(a.Get("limit", "1000"), "--limit"), a.Get("cursor"));
  if (!page.ok()) Die(page.status().message());
  if (as_json)
    std::cout << sagad::DumpJson(json(page->instances), 2) << "\n";
  else
    PrintList(page->instances, page->next_cursor.empty() ? json() : json(page->next_cursor));
  return 0;
}

// False when it printed the usage (--help).
bool ParseArgs(int argc, char** argv, Args* a, bool* as_json) {
  static const std::map<std::string, bool> kFlags = {
      // flag -> takes a value
      {"url", true},      {"token", true},   {"json", false},  {"input", true},
      {"wait", true},     {"key", true},     {"status", true}, {"saga", true},
      {"waiting", true},  {"limit", true},   {"cursor", true}, {"comment", true},
      {"reason", true},   {"outcome", true}, {"ref", true},    {"result", true},
      {"data-dir", true}, {"store", true},   {"ca", true},     {"finished-before", true}};
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
  } else if (!ReadCommand(cmd, a, c, &as_json, &out)) {
    Die("unknown command '" + cmd + "'\n" + kUsage, 2);
  }
  if (as_json) std::cout << sagad::DumpJson(out, 2) << "\n";
  return 0;
}

}  // namespace

// Any exception (a library's refusal) is one line on stderr, never an abort.
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    Die(std::string("error: ") + e.what());
  }
}

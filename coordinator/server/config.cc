#include "coordinator/server/config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "adapters/sha256.h"
#include "coordinator/server/config_services.h"
#include "util/json_limits.h"
#include "util/log.h"

namespace sagad {

namespace {
constexpr int64_t kMaxMs = kMaxConfigMs;
}  // namespace

int MachineCores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }
int DefaultWorkers(int cores) { return std::max(2, cores); }
int DefaultApiThreads(int cores) { return std::max(2, cores / 2); }
int DefaultHistoryReaders(int cores) { return std::max(1, cores / 4); }
int CallLoopsFor(int workers) { return std::max(1, workers / 4); }

ApiOptions ApiOptionsOf(const Config& config) {
  ApiOptions o;
  o.tokens = config.tokens;
  o.tls_cert_file = config.tls_cert_file;
  o.tls_key_file = config.tls_key_file;
  o.max_connections = config.max_connections;
  o.max_connections_per_client = config.max_connections_per_client;
  o.request_timeout_ms = config.request_timeout_ms;
  o.idle_timeout_ms = config.idle_timeout_ms;
  o.history_readers = config.history_readers;
  o.watchdog_ms = config.watchdog_ms;
  o.allowed_hosts = config.allowed_hosts;
  o.allowed_origins = config.allowed_origins;
  o.metrics_token = config.metrics_token;
  o.max_open_runs = config.max_open_runs;
  return o;
}

Status ParseListen(const std::string& s, std::string* host, int* port) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 >= s.size())
    return InvalidArgument("listen address must be HOST:PORT, got '" + s + "'");
  std::string h = s.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  long p = std::strtol(s.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535)
    return InvalidArgument("listen port must be 0-65535, got '" + s.substr(colon + 1) + "'");
  *host = h.empty() ? "127.0.0.1" : h;
  *port = static_cast<int>(p);
  return Status::Ok();
}

namespace {

bool LoopbackAddress(const sockaddr* sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
}

}  // namespace

bool IsLoopback(const std::string& host) {
  if (host.empty()) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  bool all = true;
  for (addrinfo* r = res; r; r = r->ai_next) all = all && LoopbackAddress(r->ai_addr);
  freeaddrinfo(res);
  return all;
}

Status CheckUrl(const std::string& where, const std::string& url) {
  // Written as it is into the request line and the Host header: a CR, LF,
  // space or other control byte would split the request (a second request
  // smuggled to the service).
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7F)
      return InvalidArgument(where + ": the URL holds a space or a control byte (CR, LF, ...)");
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
    return InvalidArgument(where + ": the URL must start with http:// or https://");
  size_t start = url.find("//") + 2;
  std::string authority = url.substr(start, url.find_first_of("/?#", start) - start);
  if (authority.find('@') != std::string::npos)
    return InvalidArgument(where +
                           ": the URL carries credentials (user:password@host), which "
                           "would be shown to every viewer; put them in \"headers\" (e.g. "
                           "\"Authorization\") instead");
  if (authority.empty()) return InvalidArgument(where + ": the URL has no host");
  return Status::Ok();
}

namespace {

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

namespace {

// Each part of the config document; a json exception (a wrong type) is
// turned into InvalidArgument by ParseConfig.

Status ParseTls(const nlohmann::json& t, Config* c) {
  if (!t.is_object()) return InvalidArgument("'tls' must be {\"cert_file\", \"key_file\"}");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(t, {"cert_file", "key_file"}, "tls"));
  c->tls_cert_file = t.value("cert_file", "");
  c->tls_key_file = t.value("key_file", "");
  if (c->tls_cert_file.empty() || c->tls_key_file.empty())
    return InvalidArgument("tls needs both cert_file and key_file");
  SAGAD_RETURN_IF_ERROR(ReadableFile(c->tls_cert_file, "tls.cert_file"));
  return ReadableFile(c->tls_key_file, "tls.key_file");
}

Status ParseApi(const nlohmann::json& a, Config* c) {
  if (!a.is_object()) return InvalidArgument("'api' must be an object");
  SAGAD_RETURN_IF_ERROR(
      OnlyKnownKeys(a,
                    {"max_connections", "max_connections_per_client", "request_timeout_ms",
                     "idle_timeout_ms", "threads", "history_readers"},
                    "api"));
  SAGAD_RETURN_IF_ERROR(IntField(a, "max_connections", 1, 1000000, "api", &c->max_connections));
  SAGAD_RETURN_IF_ERROR(IntField(a, "max_connections_per_client", 1,
                                 static_cast<int64_t>(c->max_connections), "api",
                                 &c->max_connections_per_client));
  SAGAD_RETURN_IF_ERROR(
      IntField(a, "request_timeout_ms", 100, kMaxMs, "api", &c->request_timeout_ms));
  SAGAD_RETURN_IF_ERROR(IntField(a, "idle_timeout_ms", 100, kMaxMs, "api", &c->idle_timeout_ms));
  SAGAD_RETURN_IF_ERROR(IntField(a, "history_readers", 1, 64, "api", &c->history_readers));
  return IntField(a, "threads", 1, 1024, "api", &c->api_threads);
}

// A service's TLS files: readable, the client pair together.
Status ParseToken(const nlohmann::json& t, Token* tok) {
  tok->name = t.at("name").get<std::string>();
  SAGAD_RETURN_IF_ERROR(
      OnlyKnownKeys(t, {"name", "token", "token_sha256", "role"}, "token '" + tok->name + "'"));
  if (t.contains("token") == t.contains("token_sha256"))
    return InvalidArgument("token '" + tok->name +
                           "' needs exactly one of \"token\" or \"token_sha256\"");
  if (t.contains("token")) {
    tok->token = t.at("token").get<std::string>();
    if (tok->token.empty()) return InvalidArgument("token '" + tok->name + "' is empty");
  } else {
    tok->token_sha256 = t.at("token_sha256").get<std::string>();
    if (!IsSha256Hex(tok->token_sha256))
      return InvalidArgument("token '" + tok->name +
                             "': token_sha256 must be 64 lowercase hex digits "
                             "(sagactl hash-token prints it)");
  }
  if (!ParseRole(t.value("role", "viewer"), &tok->role))
    return InvalidArgument("token '" + tok->name +
                           "': role must be viewer, submitter, operator or admin");
  return Status::Ok();
}

Status ParseWebhook(const nlohmann::json& w, WebhookConfig* wc) {
  wc->url = w.is_string() ? w.get<std::string>() : w.at("url").get<std::string>();
  if (w.is_object()) {
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(w, {"url", "secret", "timeout_ms"}, "a webhook"));
    wc->secret = w.value("secret", "");
    SAGAD_RETURN_IF_ERROR(IntField(w, "timeout_ms", 1, kMaxMs, "a webhook", &wc->timeout_ms));
  }
  return CheckUrl("a webhook's url", wc->url);
}

// The top-level scalars: listen, stores, retention, workers, leases.
Status ParseProcess(const nlohmann::json& j, Config* c) {
  if (j.contains("listen"))
    SAGAD_RETURN_IF_ERROR(
        ParseListen(j["listen"].get<std::string>(), &c->listen_host, &c->listen_port));
  c->data_dir = j.value("data_dir", c->data_dir);
  c->store = j.value("store", c->store);
  if (j.contains("retention")) {
    const auto& r = j["retention"];
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(r, {"finished_after_ms"}, "retention"));
    SAGAD_RETURN_IF_ERROR(
        IntField(r, "finished_after_ms", 0, kMaxDurationMs, "retention", &c->retention_ms));
  }
  // Integers are checked before conversion: a float out of range (1e300)
  // must be refused, not converted (undefined behaviour).
  SAGAD_RETURN_IF_ERROR(
      IntField(j, "lmdb_map_size_mb", 1, int64_t(1) << 24, "the config", &c->lmdb_map_size_mb));
  SAGAD_RETURN_IF_ERROR(IntField(j, "workers", 1, 1024, "the config", &c->workers));
  c->definitions_dir = j.value("definitions_dir", c->definitions_dir);
  if (j.contains("examples")) {
    if (!j["examples"].is_boolean())
      return InvalidArgument("the config: examples must be true or false");
    c->examples = j["examples"].get<bool>();
  }
  c->coordinator_id = j.value("coordinator_id", c->coordinator_id);
  SAGAD_RETURN_IF_ERROR(IntField(j, "lease_ms", 100, kMaxMs, "the config", &c->lease_ms));
  SAGAD_RETURN_IF_ERROR(IntField(j, "watchdog_ms", 100, kMaxMs, "the config", &c->watchdog_ms));
  SAGAD_RETURN_IF_ERROR(
      IntField(j, "max_open_runs", 0, 100000000, "the config", &c->max_open_runs));
  if (j.contains("log_level")) {
    LogLevel level;
    if (!j["log_level"].is_string() || !ParseLogLevel(j["log_level"].get<std::string>(), &level))
      return InvalidArgument("the config: log_level must be one of debug, info, warn, error");
    c->log_level = j["log_level"].get<std::string>();
  }
  for (const char* key : {"allowed_hosts", "allowed_origins"}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_array())
      return InvalidArgument(std::string(key) + " must be an array of strings");
    auto& out = std::string(key) == "allowed_hosts" ? c->allowed_hosts : c->allowed_origins;
    for (const auto& v : j[key]) {
      if (!v.is_string() || v.get<std::string>().empty())
        return InvalidArgument(std::string(key) + " must be an array of non-empty strings");
      const std::string s = v.get<std::string>();
      for (unsigned char ch : s)
        if (ch <= 0x20 || ch == 0x7F)
          return InvalidArgument(std::string(key) + ": " + DumpJson(s) +
                                 " holds a space or a control byte");
      if (std::string(key) == "allowed_origins" && s.find("://") == std::string::npos)
        return InvalidArgument("allowed_origins: " + DumpJson(s) +
                               " is not an origin (scheme://host[:port], as a browser sends it)");
      out.push_back(s);
    }
  }
  if (j.contains("metrics_token")) {
    if (!j["metrics_token"].is_string() || j["metrics_token"].get<std::string>().empty())
      return InvalidArgument("metrics_token must be a non-empty string");
    c->metrics_token = j["metrics_token"].get<std::string>();
  }
  if (c->coordinator_id.find('/') != std::string::npos)
    return InvalidArgument("coordinator_id must not contain '/'");
  return Status::Ok();
}

Status ParseLists(const nlohmann::json& j, Config* c) {
  if (j.contains("services")) {
    if (!j["services"].is_object()) return InvalidArgument("'services' must be an object");
    for (const auto& [name, s] : j["services"].items())
      SAGAD_RETURN_IF_ERROR(ParseService(name, s, &c->services[name]));
  }
  if (j.contains("mcp_servers")) {
    if (!j["mcp_servers"].is_object()) return InvalidArgument("'mcp_servers' must be an object");
    for (const auto& [name, s] : j["mcp_servers"].items()) {
      if (c->services.count(name))
        return InvalidArgument("'" + name +
                               "' is both a service and an MCP server: a call must name one");
      SAGAD_RETURN_IF_ERROR(ParseMcpServer(name, s, &c->mcp_servers[name]));
    }
  }
  if (j.contains("tokens"))
    for (const auto& t : j["tokens"]) {
      SAGAD_RETURN_IF_ERROR(ParseToken(t, &c->tokens.emplace_back()));
      // The secret as its SHA-256, however it was configured.
      auto digest = [](const Token& k) {
        return k.token.empty() ? k.token_sha256 : Sha256Hex(k.token);
      };
      const Token& added = c->tokens.back();
      const std::string a = digest(added);
      for (size_t i = 0; i + 1 < c->tokens.size(); ++i) {
        const Token& other = c->tokens[i];
        if (other.name == added.name)
          return InvalidArgument("two tokens are named '" + added.name +
                                 "': each name must say who acted, once");
        if (digest(other) == a)
          return InvalidArgument("tokens '" + other.name + "' and '" + added.name +
                                 "' are the same secret: a caller could not be told apart");
      }
    }
  if (j.contains("webhooks")) {
    if (!j["webhooks"].is_array()) return InvalidArgument("'webhooks' must be an array");
    for (const auto& w : j["webhooks"])
      SAGAD_RETURN_IF_ERROR(ParseWebhook(w, &c->webhooks.emplace_back()));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Config> ParseConfig(const nlohmann::json& j) {
  Config c;
  if (!j.is_object()) return InvalidArgument("config must be a JSON object");
  SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(
      j, {"listen",         "data_dir", "store",         "lmdb_map_size_mb", "tls",
          "retention",      "workers",  "api",           "definitions_dir",  "examples",
          "coordinator_id", "lease_ms", "watchdog_ms",   "services",         "mcp_servers",
          "tokens",         "webhooks", "allowed_hosts", "allowed_origins",  "metrics_token",
          "max_open_runs",  "log_level"},
      "the config"));
  try {
    SAGAD_RETURN_IF_ERROR(ParseProcess(j, &c));
    if (j.contains("tls")) SAGAD_RETURN_IF_ERROR(ParseTls(j["tls"], &c));
    if (j.contains("api")) SAGAD_RETURN_IF_ERROR(ParseApi(j["api"], &c));
    SAGAD_RETURN_IF_ERROR(ParseLists(j, &c));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("config: ") + e.what());
  }
  return c;
}

StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return InvalidArgument("config file " + path + " is not valid JSON");
  if (std::string at = DuplicateKey(ss.str()); !at.empty())
    return InvalidArgument("config file " + path + ": key " + at + " appears twice");
  return ParseConfig(j);
}

Status ApplyServiceOverride(const std::string& arg, Config* config) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return InvalidArgument("--service expects NAME=URL, got '" + arg + "'");
  std::string name = arg.substr(0, eq), url = arg.substr(eq + 1);
  SAGAD_RETURN_IF_ERROR(CheckUrl("--service " + name, url));
  ServiceConfig& sc = config->services[name];
  sc.name = name;
  sc.base_url = url;
  return Status::Ok();
}

}  // namespace sagad

// The "services" and "mcp_servers" sections of the config (config.h).
#include "coordinator/server/config_services.h"

#include <cctype>
#include <fstream>

#include "coordinator/server/config.h"
#include "util/json_limits.h"

namespace sagad {

Status ReadableFile(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  if (!f) return InvalidArgument(key + ": cannot read " + path);
  return Status::Ok();
}

namespace {

constexpr int64_t kMaxMs = kMaxConfigMs;

Status ParseServiceTls(const nlohmann::json& s, const std::string& where, ServiceConfig* sc) {
  sc->ca_file = s.value("ca_file", "");
  sc->client_cert_file = s.value("client_cert_file", "");
  sc->client_key_file = s.value("client_key_file", "");
  sc->tls_verify = s.value("tls_verify", true);
  if (sc->client_cert_file.empty() != sc->client_key_file.empty())
    return InvalidArgument(where + ": client_cert_file and client_key_file go together");
  for (const auto& [file, key] :
       {std::pair{sc->ca_file, "ca_file"}, std::pair{sc->client_cert_file, "client_cert_file"},
        std::pair{sc->client_key_file, "client_key_file"}})
    if (!file.empty()) SAGAD_RETURN_IF_ERROR(ReadableFile(file, where + "." + key));
  return Status::Ok();
}

Status ParseRetry(const nlohmann::json& s, const std::string& name, ServiceConfig* sc) {
  if (s.contains("retry")) {
    auto r = RetryPolicy::FromJson(s["retry"]);
    if (!r.ok()) return InvalidArgument("service '" + name + "': " + r.status().message());
    sc->retry = *r;
  }
  if (s.contains("retry_budget")) {
    sc->retry_budget.capacity = s["retry_budget"].value("capacity", sc->retry_budget.capacity);
    sc->retry_budget.per_second =
        s["retry_budget"].value("per_second", sc->retry_budget.per_second);
    if (sc->retry_budget.capacity < 1 || sc->retry_budget.per_second < 0)
      return InvalidArgument("service '" + name +
                             "': retry_budget needs capacity >= 1 and per_second >= 0");
  }
  return Status::Ok();
}

// max_in_flight (1..100000) and max_per_second (above 0, at most 1e6);
// absent: unlimited. max_connections (1..10000; absent: 64).
Status ParseLimits(const nlohmann::json& s, const std::string& where, ServiceConfig* sc) {
  SAGAD_RETURN_IF_ERROR(IntField(s, "max_in_flight", 1, 100000, where, &sc->max_in_flight));
  SAGAD_RETURN_IF_ERROR(IntField(s, "max_connections", 1, 10000, where, &sc->max_connections));
  if (!s.contains("max_per_second")) return Status::Ok();
  const nlohmann::json& r = s["max_per_second"];
  if (!r.is_number() || !(r.get<double>() > 0) || r.get<double>() > 1e6)
    return InvalidArgument(where + ": max_per_second must be a number above 0 and at most 1000000");
  sc->max_per_second = r.get<double>();
  return Status::Ok();
}

// A header the adapter writes as it is: a name of token characters (RFC
// 9110), a value without CR, LF or other control bytes (which would end the
// header block and start a second request).
Status CheckHeader(const std::string& where, const std::string& name, const std::string& value) {
  static const std::string kTokenChars = "!#$%&'*+-.^_`|~";
  if (name.empty()) return InvalidArgument(where + ": a header name is empty");
  for (unsigned char c : name)
    if (!std::isalnum(c) && kTokenChars.find(static_cast<char>(c)) == std::string::npos)
      return InvalidArgument(where + ": header name " + DumpJson(name) +
                             " holds a character a header name cannot carry");
  for (unsigned char c : value)
    if ((c < 0x20 && c != '\t') || c == 0x7F)
      return InvalidArgument(
          where + "." + name +
          ": the value holds a control byte (CR, LF, ...) a header cannot carry");
  return Status::Ok();
}

// "services": {"NAME": "URL" | {...}}.
}  // namespace

Status ParseService(const std::string& name, const nlohmann::json& s, ServiceConfig* sc,
                    const std::string& section) {
  sc->name = name;
  if (s.is_string()) {
    sc->base_url = s.get<std::string>();
  } else {
    const std::string where = section + "." + name;
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(
        s,
        {"base_url", "timeout_ms", "headers", "queryable", "idempotent", "operations_path", "retry",
         "retry_budget", "max_response_bytes", "ca_file", "client_cert_file", "client_key_file",
         "tls_verify", "max_in_flight", "max_per_second", "max_connections"},
        where));
    SAGAD_RETURN_IF_ERROR(ParseServiceTls(s, where, sc));
    SAGAD_RETURN_IF_ERROR(ParseLimits(s, where, sc));
    SAGAD_RETURN_IF_ERROR(OnlyKnownKeys(s.value("retry_budget", nlohmann::json::object()),
                                        {"capacity", "per_second"}, where + ".retry_budget"));
    sc->base_url = s.at("base_url").get<std::string>();
    SAGAD_RETURN_IF_ERROR(IntField(s, "timeout_ms", 1, kMaxMs, where, &sc->timeout_ms));
    sc->queryable = s.value("queryable", sc->queryable);
    sc->idempotent = s.value("idempotent", sc->idempotent);
    sc->operations_path = s.value("operations_path", sc->operations_path);
    // Every operation must be asked about by its own key: a path without
    // {key} would answer every question with one answer (and a 200 there
    // would turn every unclear step COMMITTED).
    const std::string& op = sc->operations_path;
    if (op.empty() || op[0] != '/' || op.find("{key}") == std::string::npos)
      return InvalidArgument(where + ".operations_path must start with '/' and contain {key}");
    for (unsigned char c : op)
      if (c <= 0x20 || c >= 0x7F)
        return InvalidArgument(where +
                               ".operations_path holds a control byte, a space or non-ASCII");
    SAGAD_RETURN_IF_ERROR(
        IntField(s, "max_response_bytes", 1024, int64_t(1) << 30, where, &sc->max_response_bytes));
    SAGAD_RETURN_IF_ERROR(ParseRetry(s, name, sc));
    if (s.contains("headers"))
      for (const auto& [k, v] : s["headers"].items()) {
        if (!v.is_string()) return InvalidArgument(where + ".headers." + k + " must be a string");
        SAGAD_RETURN_IF_ERROR(CheckHeader(where + ".headers", k, v.get<std::string>()));
        sc->headers[k] = v.get<std::string>();
      }
  }
  SAGAD_RETURN_IF_ERROR(CheckUrl("service '" + name + "': base_url", sc->base_url));
  if (sc->timeout_ms < 1) return InvalidArgument("service '" + name + "': timeout_ms must be > 0");
  return Status::Ok();
}

// "mcp_servers": {"NAME": {"url": URL} | {"command": [PROGRAM, ARG...],
// "env": {...}}, with a service's timeout, retry and limits}.
Status ParseMcpServer(const std::string& name, const nlohmann::json& s, McpServerConfig* mc) {
  const std::string where = "mcp_servers." + name;
  if (!s.is_object())
    return InvalidArgument(where + " must be an object with \"url\" or \"command\"");
  SAGAD_RETURN_IF_ERROR(
      OnlyKnownKeys(s,
                    {"url", "command", "env", "timeout_ms", "headers", "retry", "retry_budget",
                     "max_in_flight", "max_per_second", "max_connections", "max_response_bytes",
                     "ca_file", "client_cert_file", "client_key_file", "tls_verify"},
                    where));
  if (s.contains("url") == s.contains("command"))
    return InvalidArgument(
        where + " needs exactly one of \"url\" (Streamable HTTP) or \"command\" (stdio)");
  nlohmann::json svc = s;
  svc.erase("url");
  svc.erase("command");
  svc.erase("env");
  if (s.contains("url")) {
    if (!s["url"].is_string()) return InvalidArgument(where + ".url must be a string");
    svc["base_url"] = s["url"];
    if (s.contains("env")) return InvalidArgument(where + ": env is for a \"command\" server");
  } else {
    const nlohmann::json& cmd = s["command"];
    if (!cmd.is_array() || cmd.empty())
      return InvalidArgument(where +
                             ".command must be a non-empty array of strings (the program and its "
                             "arguments)");
    for (const auto& a : cmd) {
      if (!a.is_string() || a.get<std::string>().empty() ||
          a.get<std::string>().find('\0') != std::string::npos)
        return InvalidArgument(where + ".command must hold non-empty strings");
      mc->command.push_back(a.get<std::string>());
    }
    if (s.contains("headers")) return InvalidArgument(where + ": headers are for a \"url\" server");
    svc["base_url"] = "http://127.0.0.1:9";  // never dialled: the server is a child process
    if (s.contains("env")) {
      if (!s["env"].is_object()) return InvalidArgument(where + ".env must be an object");
      for (const auto& [k, v] : s["env"].items()) {
        if (k.empty() || k.find('=') != std::string::npos || !v.is_string())
          return InvalidArgument(where + ".env." + k +
                                 ": a variable needs a name without '=' and a string value");
        mc->env.emplace_back(k, v.get<std::string>());
      }
    }
  }
  SAGAD_RETURN_IF_ERROR(ParseService(name, svc, &mc->service, "mcp_servers"));
  return Status::Ok();
}

}  // namespace sagad

#include "coordinator/http/api_tenancy.h"

#include <algorithm>
#include <cctype>

#include "adapters/sha256.h"
#include "util/json_limits.h"

namespace sagad {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsIPv4Loopback(const std::string& h) {
  int parts = 0, digits = 0, value = 0;
  for (char c : h + ".") {
    if (c == '.') {
      if (digits == 0 || value > 255) return false;
      if (parts == 0 && value != 127) return false;
      ++parts;
      digits = value = 0;
    } else if (std::isdigit(static_cast<unsigned char>(c)) && digits < 3) {
      value = value * 10 + (c - '0');
      ++digits;
    } else {
      return false;
    }
  }
  return parts == 4;
}

bool Listed(const std::vector<std::string>& list, const std::string& v) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& x) { return Lower(x) == v; });
}

// A Host header value the tokenless rule accepts: a loopback name, or one
// of allowed_hosts (as a name, or as name:port).
bool HostAllowed(const std::string& host_header, const ApiOptions& o) {
  const std::string whole = Lower(host_header);
  const std::string name = HostName(host_header);
  return IsLoopbackName(name) || Listed(o.allowed_hosts, name) || Listed(o.allowed_hosts, whole);
}

// "scheme://authority" -> authority; empty when it is not of that form
// (Origin: null, from a sandboxed frame or a file, among them).
std::string OriginAuthority(const std::string& origin) {
  size_t sep = origin.find("://");
  if (sep == std::string::npos || sep == 0) return "";
  std::string rest = origin.substr(sep + 3);
  if (rest.find_first_of("/?#@") != std::string::npos) return "";
  return rest;
}

}  // namespace

std::string ScopedKey(const Caller& caller, const std::string& key) {
  if (key.empty() || caller.name == "local") return key;
  // A newline never appears in a key (a header value), so the two parts
  // never run together; a long name is shortened to its digest (LMDB keys
  // are at most 511 bytes).
  const std::string who =
      caller.name.size() <= 64 ? caller.name : "sha256:" + Sha256Hex(caller.name);
  return who + "\n" + key;
}

std::string HostName(const std::string& authority) {
  std::string a = Lower(authority);
  if (!a.empty() && a[0] == '[') {
    size_t close = a.find(']');
    return close == std::string::npos ? a : a.substr(0, close + 1);
  }
  size_t colon = a.find(':');
  return colon == std::string::npos ? a : a.substr(0, colon);
}

bool IsLoopbackName(const std::string& host) {
  return host == "localhost" || host == "[::1]" || IsIPv4Loopback(host);
}

std::string ForeignRequest(const HttpRequest& req, const ApiOptions& o) {
  const bool tokenless = o.tokens.empty();
  const bool mcp = req.path == "/mcp";
  if (tokenless && req.has_header("Host") && !HostAllowed(req.get_header_value("Host"), o))
    return "Host '" + SanitizeUtf8(req.get_header_value("Host")) +
           "' is not a loopback name: without tokens sagad answers only requests to "
           "localhost, 127.0.0.1 or [::1] (or a name in allowed_hosts), so that no web page "
           "can reach it by rebinding its own name to this machine";
  if (!req.has_header("Origin") || (!tokenless && !mcp)) return "";
  const std::string origin = req.get_header_value("Origin");
  if (Listed(o.allowed_origins, Lower(origin))) return "";
  const std::string authority = OriginAuthority(origin);
  if (tokenless && !authority.empty() && HostAllowed(authority, o)) return "";
  return "Origin '" + SanitizeUtf8(origin) + "' is not allowed" +
         (tokenless ? ": without tokens sagad answers only pages served from a loopback name "
                      "(or a host in allowed_hosts, or an origin in allowed_origins)"
                    : ": /mcp answers a browser's request only from an origin in "
                      "allowed_origins");
}

}  // namespace sagad

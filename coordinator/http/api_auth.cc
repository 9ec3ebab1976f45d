#include "coordinator/http/api_auth.h"

#include <strings.h>

#include <map>

#include "adapters/sha256.h"
#include "coordinator/http/api_exchange.h"

namespace sagad {

bool ParseRole(const std::string& s, Role* out) {
  static const std::map<std::string, Role> kRoles = {{"viewer", Role::kViewer},
                                                     {"submitter", Role::kSubmitter},
                                                     {"operator", Role::kOperator},
                                                     {"admin", Role::kAdmin}};
  auto it = kRoles.find(s);
  if (it == kRoles.end()) return false;
  *out = it->second;
  return true;
}

const char* RoleName(Role role) {
  static const char* kNames[] = {"viewer", "submitter", "operator", "admin"};
  return kNames[static_cast<int>(role)];
}

const Token* ApiAuth::Find(const std::string& presented) const {
  std::string sha256;  // computed once, if some token is configured by its hash
  for (const Token& t : tokens_) {
    if (t.token.empty()) {
      if (sha256.empty()) sha256 = Sha256Hex(presented);
      if (ConstantTimeEquals(t.token_sha256, sha256)) return &t;
    } else if (ConstantTimeEquals(t.token, presented)) {
      return &t;
    }
  }
  return nullptr;
}

bool ApiAuth::SecretMatches(const std::string& presented, const std::string& secret) {
  return !secret.empty() && ConstantTimeEquals(presented, secret);
}

std::string ApiAuth::Authorize(const HttpRequest& req, HttpResponse& res, Role need,
                               const Token** who) const {
  if (tokens_.empty()) return "local";
  std::string h = req.get_header_value("Authorization");
  size_t space = h.find(' ');
  if (space == std::string::npos || strncasecmp(h.c_str(), "Bearer", space) != 0 || space != 6) {
    res.set_header("WWW-Authenticate", "Bearer");
    Problem(req, res, 401, "missing bearer token (Authorization: Bearer TOKEN)");
    return "";
  }
  size_t start = h.find_first_not_of(' ', space);
  const Token* t = Find(start == std::string::npos ? "" : h.substr(start));
  if (!t) {
    res.set_header("WWW-Authenticate", "Bearer error=\"invalid_token\"");
    Problem(req, res, 401, "unknown bearer token");
    return "";
  }
  if (static_cast<int>(t->role) < static_cast<int>(need)) {
    Problem(req, res, 403,
            "token '" + t->name + "' has role " + RoleName(t->role) + "; this needs role " +
                RoleName(need) + " or above",
            {{"required_role", RoleName(need)}, {"role", RoleName(t->role)}});
    return "";
  }
  if (who) *who = t;
  return t->name;
}

}  // namespace sagad

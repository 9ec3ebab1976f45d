// ApiAuth: who a request comes from, by its bearer token (RFC 6750), and
// whether that token's role may do what it asks. With no tokens configured
// every caller is "local" with every role (sagad then listens on loopback
// only). The scheme is matched case-insensitively (RFC 9110 11.1); secrets
// are compared in constant time; a configured token_sha256 is compared with
// the SHA-256 of the presented token.
// Thread-safety: immutable after construction.
#pragma once

#include <string>
#include <vector>

#include "coordinator/http/api_options.h"
#include "coordinator/http/api_tenancy.h"
#include "coordinator/http/http_message.h"

namespace sagad {

class ApiAuth {
 public:
  explicit ApiAuth(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  // The caller's name, or "" with a 401 (no or unknown token) or a 403
  // naming the role needed already written into `res`.
  std::string Authorize(const HttpRequest& req, HttpResponse& res, Role need,
                        const Token** who = nullptr) const;
  // Every principal a request may come from: "local" (tokenless, and the
  // keys written before principals), then each token's name.
  std::vector<std::string> Principals() const {
    std::vector<std::string> out = {"local"};
    for (const Token& t : tokens_) out.push_back(t.name);
    return out;
  }
  // Authorize, as the caller: its name and role (name empty: refused, the
  // answer written). Tokenless: "local", with every role.
  Caller Identify(const HttpRequest& req, HttpResponse& res, Role need) const {
    const Token* t = nullptr;
    Caller c;
    c.name = Authorize(req, res, need, &t);
    if (t) c.role = t->role;
    return c;
  }
  // Whether `presented` (a bearer token's secret) is `secret`, compared in
  // constant time.
  static bool SecretMatches(const std::string& presented, const std::string& secret);
  // Whether the request carries a known token (any role); else a 401 in
  // `res`. For judging a head before its body is accepted.
  bool Authenticated(const HttpRequest& req, HttpResponse& res) const {
    return !Authorize(req, res, Role::kViewer).empty();
  }

 private:
  const Token* Find(const std::string& presented) const;

  std::vector<Token> tokens_;
};

}  // namespace sagad

// Who may reach sagad, and what each caller sees (docs/agents.md, "Agents
// are tenants"):
// - the Host/Origin rule: without tokens, sagad answers only requests whose
//   Host is a loopback name (localhost, 127.0.0.1 or another 127/8 address,
//   [::1], with or without a port) or one of `allowed_hosts`, and whose
//   Origin, when present, names such a host or is one of `allowed_origins`:
//   a web page that rebinds its own name to 127.0.0.1 sends its own name in
//   both. /mcp checks Origin in every mode (MCP's transport: a server MUST).
// - the ownership rule: an instance belongs to the principal that created
//   it (the token's name; "local" without tokens). A submitter sees and acts
//   on its own only, and its Idempotency-Keys are its own; viewers,
//   operators and admins see every instance.
// Pure functions of a request and the options: no state, no lock.
#pragma once

#include <string>
#include <vector>

#include "coordinator/http/api_options.h"
#include "coordinator/http/http_message.h"

namespace sagad {

// The caller of a request, once its token was checked.
struct Caller {
  std::string name;          // the principal: a token's name, or "local"
  Role role = Role::kAdmin;  // tokenless: every role
  // Every instance, not only its own: any role but submitter.
  bool SeesAll() const { return role != Role::kSubmitter; }
  // Whether an instance created by `owner` is the caller's to see.
  bool Sees(const std::string& owner) const { return SeesAll() || owner == name; }
};

// The Idempotency-Key `key` as the caller's own: each principal has its
// own key space ("local", the tokenless caller, keeps the key as given, as
// before principals). Empty for an empty key.
std::string ScopedKey(const Caller& caller, const std::string& key);

// The host part of a Host header value or of an Origin's authority:
// lowercase, without the port ("[::1]" keeps its brackets).
std::string HostName(const std::string& authority);
// localhost, an IPv4 address in 127/8, or [::1].
bool IsLoopbackName(const std::string& host);

// Empty when the request may go on; else why it is refused (403). Without
// tokens: the Host and Origin rule above. With tokens: nothing (a bearer
// token cannot ride a cross-site request), but /mcp's Origin.
std::string ForeignRequest(const HttpRequest& req, const ApiOptions& options);

}  // namespace sagad

// SHA-256 of canonical JSON: the args hash an idempotency key is bound to.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sagad {

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);
// Canonical JSON: keys sorted (nlohmann objects are ordered), no whitespace.
std::string CanonicalJson(const nlohmann::json& j);

}  // namespace sagad

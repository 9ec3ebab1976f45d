#include "adapters/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

#include "util/json_limits.h"

namespace sagad {

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

std::string CanonicalJson(const nlohmann::json& j) {
  return DumpJson(j);  // objects print with sorted keys
}

}  // namespace sagad

#include "adapters/sha256.h"

#include <gtest/gtest.h>

namespace sagad {
namespace {

// FIPS 180-2 test vectors.
TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, CanonicalJsonIgnoresKeyOrderAndWhitespace) {
  auto a = nlohmann::json::parse(R"({"b": [1, 2], "a": {"y": 1, "x": 2}})");
  auto b = nlohmann::json::parse(R"({"a":{"x":2,"y":1},"b":[1,2]})");
  EXPECT_EQ(CanonicalJson(a), CanonicalJson(b));
  EXPECT_EQ(CanonicalJson(a), R"({"a":{"x":2,"y":1},"b":[1,2]})");
  EXPECT_EQ(Sha256Hex(CanonicalJson(a)), Sha256Hex(CanonicalJson(b)));
  EXPECT_NE(CanonicalJson(a), CanonicalJson(nlohmann::json::parse(R"({"b":[2,1]})")));
}

}  // namespace
}  // namespace sagad

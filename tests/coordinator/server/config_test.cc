// The config file: every key is known or refused by name; tokens by value
// or by SHA-256.
#include "coordinator/server/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "adapters/sha256.h"

namespace sagad {
namespace {

using nlohmann::json;

std::string Refusal(const json& config) {
  auto c = ParseConfig(config);
  return c.ok() ? "" : c.status().message();
}

TEST(ConfigTest, AMisspeltKeyAnywhereIsRefusedByName) {
  EXPECT_NE(Refusal({{"tokenz", json::array()}}).find("unknown key 'tokenz' in the config"),
            std::string::npos);
  json svc = {{"base_url", "http://x"}, {"timout_ms", 5}};
  EXPECT_NE(Refusal({{"services", {{"pay", svc}}}}).find("'timout_ms' in services.pay"),
            std::string::npos);
  svc = {{"base_url", "http://x"}, {"retry", {{"max_atempts", 3}}}};
  EXPECT_NE(Refusal({{"services", {{"pay", svc}}}}).find("'max_atempts'"), std::string::npos);
  svc = {{"base_url", "http://x"}, {"retry_budget", {{"capacty", 3}}}};
  EXPECT_NE(Refusal({{"services", {{"pay", svc}}}}).find("'capacty' in services.pay.retry_budget"),
            std::string::npos);
  EXPECT_NE(
      Refusal({{"tokens", {{{"name", "a"}, {"token", "t"}, {"rol", "admin"}}}}}).find("'rol'"),
      std::string::npos);
  EXPECT_NE(Refusal({{"webhooks", {{{"url", "http://x"}, {"secrit", "s"}}}}}).find("'secrit'"),
            std::string::npos);
  EXPECT_EQ(Refusal({{"listen", "127.0.0.1:1"},
                     {"lmdb_map_size_mb", 64},
                     {"store", ""},
                     {"lease_ms", 1000},
                     {"workers", 2}}),
            "");
}

TEST(ConfigTest, ServiceLimitsAreReadAndBounded) {
  auto c = ParseConfig(nlohmann::json::parse(R"({"services": {"pay": {
      "base_url": "http://127.0.0.1:1", "max_in_flight": 20, "max_per_second": 2.5,
      "max_connections": 8}}})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->services["pay"].max_in_flight, 20);
  EXPECT_EQ(c->services["pay"].max_connections, 8);
  EXPECT_EQ(c->services["pay"].max_per_second, 2.5);
  auto unlimited =
      ParseConfig(nlohmann::json::parse(R"({"services": {"pay": "http://127.0.0.1:1"}})"));
  ASSERT_TRUE(unlimited.ok());
  EXPECT_EQ(unlimited->services["pay"].max_in_flight, 0);
  EXPECT_EQ(unlimited->services["pay"].max_per_second, 0);
  EXPECT_EQ(unlimited->services["pay"].max_connections, 64);
  for (const char* bad :
       {R"("max_in_flight": 0)", R"("max_in_flight": 1.5)", R"("max_per_second": 0)",
        R"("max_per_second": "5")", R"("max_per_second": 1e9)", R"("max_connections": 0)",
        R"("max_connections": 10001)", R"("max_connections": "4")"}) {
    auto r = ParseConfig(nlohmann::json::parse(
        std::string(R"({"services": {"pay": {"base_url": "http://127.0.0.1:1", )") + bad + "}}}"));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("services.pay"), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, ATokenMayBeGivenByItsSha256Only) {
  std::string hash = Sha256Hex("s3cret");
  auto c =
      ParseConfig({{"tokens", {{{"name", "ops"}, {"token_sha256", hash}, {"role", "operator"}}}}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tokens[0].token_sha256, hash);
  EXPECT_TRUE(c->tokens[0].token.empty());
  EXPECT_NE(
      Refusal({{"tokens", {{{"name", "a"}, {"token_sha256", "abc"}}}}}).find("64 lowercase hex"),
      std::string::npos);
  EXPECT_NE(Refusal({{"tokens", {{{"name", "a"}, {"token", "t"}, {"token_sha256", hash}}}}})
                .find("exactly one"),
            std::string::npos);
  EXPECT_NE(Refusal({{"tokens", {{{"name", "a"}}}}}).find("exactly one"), std::string::npos);
}

TEST(ConfigTest, TheLmdbMapSizeIsBounded) {
  EXPECT_EQ(ParseConfig({{"lmdb_map_size_mb", 10}})->lmdb_map_size_mb, 10);
  EXPECT_EQ(ParseConfig(json::object())->lmdb_map_size_mb, 65536);
  EXPECT_NE(Refusal({{"lmdb_map_size_mb", 0}}).find("lmdb_map_size_mb"), std::string::npos);
}

TEST(ConfigTest, IntegersOutOfRangeOrNotIntegersAreRefusedByName) {
  // 1e300 used to be converted to int: undefined behaviour (UBSan).
  json svc = {{"base_url", "http://x"}, {"timeout_ms", 1e300}};
  EXPECT_NE(
      Refusal({{"services", {{"pay", svc}}}}).find("services.pay: timeout_ms must be an integer"),
      std::string::npos)
      << Refusal({{"services", {{"pay", svc}}}});
  EXPECT_NE(Refusal({{"workers", 1e300}}).find("workers must be an integer from 1 to 1024"),
            std::string::npos);
  EXPECT_NE(Refusal({{"workers", 2.5}}).find("workers"), std::string::npos);
  EXPECT_NE(Refusal({{"lease_ms", "10000"}}).find("lease_ms"), std::string::npos);
  EXPECT_NE(Refusal({{"lease_ms", 50}}).find("lease_ms must be an integer from 100"),
            std::string::npos);
  EXPECT_NE(Refusal({{"api", {{"threads", -1e300}}}}).find("api: threads"), std::string::npos);
  EXPECT_NE(Refusal({{"api", {{"max_connections", 10}, {"max_connections_per_client", 11}}}})
                .find("max_connections_per_client must be an integer from 1 to 10"),
            std::string::npos);
  EXPECT_NE(Refusal({{"retention", {{"finished_after_ms", -1}}}}).find("finished_after_ms"),
            std::string::npos);
  EXPECT_NE(Refusal({{"webhooks", {{{"url", "http://x"}, {"timeout_ms", 1e19}}}}})
                .find("a webhook: timeout_ms"),
            std::string::npos);
  // A float with no fraction is an integer.
  auto c = ParseConfig({{"workers", 8.0}, {"api", {{"threads", 4}}}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->workers, 8);
  EXPECT_EQ(c->api_threads, 4);
}

// Nothing on a shard waits: by default one shard per core (at least 2).
TEST(ConfigTest, WorkersDefaultToTheCoresAtLeastTwo) {
  auto c = ParseConfig(nlohmann::json::object());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->workers, std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
  EXPECT_GE(c->workers, 2);
}

// The threads a default sagad runs (config.h names each) stay within
// 2 x cores + 4 on any machine of 2 cores or more: FrontEndTest counts
// them in a running sagad on this one.
TEST(ConfigTest, TheDefaultThreadsStayWithinTwiceTheCoresPlusFour) {
  for (int cores : {2, 3, 4, 8, 16, 64, 256}) {
    const int workers = DefaultWorkers(cores);
    const int main_loop = 1, committer = 1;
    EXPECT_LE(main_loop + workers + DefaultApiThreads(cores) + CallLoopsFor(workers) + committer +
                  DefaultHistoryReaders(cores),
              2 * cores + 4)
        << cores << " cores";
  }
  auto c = ParseConfig(nlohmann::json::object());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(c->api_threads, std::max(2, cores / 2));
  EXPECT_EQ(c->history_readers, std::max(1, cores / 4));
  EXPECT_EQ(ApiOptionsOf(*c).history_readers, c->history_readers);
  auto set = ParseConfig({{"api", {{"threads", 32}}}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->api_threads, 32);
}

// Regression: user:password@ in a URL was shown to viewers and unusable.
TEST(ConfigTest, CredentialsInAServiceOrWebhookUrlAreRefusedWithoutEchoingThem) {
  std::string why =
      Refusal({{"services", {{"pay", {{"base_url", "http://user:PASSWD@pay.internal:80/x"}}}}}});
  EXPECT_NE(why.find("service 'pay'"), std::string::npos) << why;
  EXPECT_NE(why.find("headers"), std::string::npos) << why;
  EXPECT_EQ(why.find("PASSWD"), std::string::npos) << why;
  why = Refusal({{"services", {{"pay", "https://tok@pay.internal"}}}});
  EXPECT_NE(why.find("credentials"), std::string::npos) << why;
  why = Refusal({{"webhooks", {"https://u:p@hooks.example/x"}}});
  EXPECT_NE(why.find("credentials"), std::string::npos) << why;
  // An '@' after the host (in the path or query) is no credential.
  EXPECT_EQ(Refusal({{"services", {{"pay", {{"base_url", "http://pay.internal/a@b"}}}}}}), "");
  Config c;
  EXPECT_FALSE(ApplyServiceOverride("pay=http://u:p@h:1", &c).ok());
}

// Regression: the loopback rule was a string prefix ("127." anything).
TEST(ConfigTest, OnlyAddressesThatAreLoopbackCountAsLoopback) {
  for (const char* yes : {"127.0.0.1", "127.1.2.3", "::1", "localhost"})
    EXPECT_TRUE(IsLoopback(yes)) << yes;
  for (const char* no : {"127.example", "127.0.0.1.invalid", "0.0.0.0", "::", "10.0.0.1", ""})
    EXPECT_FALSE(IsLoopback(no)) << no;
}

TEST(ConfigTest, AKeyGivenTwiceInTheConfigFileIsRefused) {
  char path[] = "/tmp/sagad-config-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = R"({"workers": 4, "workers": 8})";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  auto c = LoadConfigFile(path);
  unlink(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/workers appears twice"), std::string::npos)
      << c.status().message();
}

// Regression: a header name or value with CR/LF was written raw (request
// splitting); an operations_path without {key} answered every question
// with one answer; the documented 30-day retention was over a 32-bit bound.
TEST(ConfigTest, AHeaderThatWouldSplitTheRequestIsRefusedNamingIt) {
  json svc = {{"base_url", "http://x"}, {"headers", {{"X-Token", "a\r\nX-Evil: 1"}}}};
  EXPECT_NE(Refusal({{"services", {{"pay", svc}}}}).find("services.pay.headers.X-Token"),
            std::string::npos)
      << Refusal({{"services", {{"pay", svc}}}});
  svc = {{"base_url", "http://x"}, {"headers", {{"X Token", "a"}}}};
  EXPECT_NE(Refusal({{"services", {{"pay", svc}}}}).find("header name \"X Token\""),
            std::string::npos)
      << Refusal({{"services", {{"pay", svc}}}});
  svc = {{"base_url", "http://x"}, {"headers", {{"Authorization", "Bearer t"}}}};
  EXPECT_EQ(Refusal({{"services", {{"pay", svc}}}}), "");
}

TEST(ConfigTest, AnOperationsPathWithoutItsKeyIsRefused) {
  json svc = {{"base_url", "http://x"}, {"operations_path", "/ops/status"}};
  EXPECT_NE(Refusal({{"services", {{"pay", svc}}}})
                .find("services.pay.operations_path must start with '/' and contain {key}"),
            std::string::npos);
  svc = {{"base_url", "http://x"}, {"operations_path", "/ops/{key}"}};
  EXPECT_EQ(Refusal({{"services", {{"pay", svc}}}}), "");
}

TEST(ConfigTest, ThirtyDaysOfRetentionAreAccepted) {
  auto c = ParseConfig({{"retention", {{"finished_after_ms", 2592000000LL}}}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->retention_ms, 2592000000LL);
}
TEST(ConfigTest, ATokenNameOrSecretGivenTwiceIsRefused) {
  json twice_named = json::array({{{"name", "a"}, {"token", "s1"}, {"role", "viewer"}},
                                  {{"name", "a"}, {"token", "s2"}, {"role", "admin"}}});
  EXPECT_NE(Refusal({{"tokens", twice_named}}).find("two tokens are named 'a'"), std::string::npos)
      << Refusal({{"tokens", twice_named}});
  json same_secret = json::array({{{"name", "a"}, {"token", "s1"}, {"role", "viewer"}},
                                  {{"name", "b"}, {"token_sha256", Sha256Hex("s1")}}});
  EXPECT_NE(Refusal({{"tokens", same_secret}}).find("are the same secret"), std::string::npos)
      << Refusal({{"tokens", same_secret}});
}

TEST(ConfigTest, TheLogLevelIsOneOfFourAndInfoByDefault) {
  auto c = ParseConfig(json::object());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->log_level, "info");
  for (const char* level : {"debug", "info", "warn", "error"})
    EXPECT_EQ(Refusal({{"log_level", level}}), "") << level;
  EXPECT_NE(Refusal({{"log_level", "loud"}}).find("log_level must be one of"), std::string::npos);
  EXPECT_NE(Refusal({{"log_level", 3}}).find("log_level"), std::string::npos);
}
}  // namespace
}  // namespace sagad

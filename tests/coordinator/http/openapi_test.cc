// The OpenAPI document in the repo and the routes the server registers match
// exactly, and the document is served.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "adapters/http_adapter.h"
#include "coordinator/engine/engine.h"
#include "coordinator/http/http_api.h"
#include "coordinator/store/lmdb/lmdb_store.h"
#include "tests/testing/cluster.h"

namespace sagad {
namespace {

TEST(OpenApiTest, EveryRouteIsDocumentedAndEveryDocumentedRouteIsServed) {
  testing::TempDir dir;
  auto store = LmdbStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  HttpAdapter adapter({});
  SystemClock clock;
  Engine engine(**store, adapter, clock);
  ApiServer api(engine, ApiOptions{});
  auto port = api.Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  std::thread serve([&] { api.Serve(); });

  std::ifstream in(SAGAD_SOURCE_DIR "/coordinator/http/openapi.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json doc = nlohmann::json::parse(ss.str());
  EXPECT_EQ(doc["openapi"], "3.1.0");
  std::set<std::string> documented;
  for (const auto& [path, ops] : doc["paths"].items())
    for (const auto& [method, op] : ops.items()) {
      std::string m = method;
      for (char& c : m) c = static_cast<char>(toupper(c));
      documented.insert(m + " " + path);
    }
  auto routes = api.RegisteredRoutes();
  std::set<std::string> served(routes.begin(), routes.end());
  EXPECT_EQ(served, documented);

  testing::Reply r = testing::Http(*port, "GET", "/v1/openapi.json");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, doc);
  api.Stop();
  serve.join();
  engine.Stop();
}

}  // namespace
}  // namespace sagad

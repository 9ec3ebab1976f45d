// Reads of the history at scale. Searches by a declared search
// attribute are answered from its index; by any other field, boundedly.
// Reads never take the capacity of writes: with
// one API handler thread and three operators looping a list that reads
// every stored snapshot (a search on an undeclared input field), a
// submission is answered as fast as without them: the lists run on the
// history readers, not on the handler. Before, each submission queued
// behind the lists for the one handler and took longer than a list.
// Latencies are compared within the run (a ratio), never to a fixed time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <thread>

#include "tests/testing/cluster.h"
#include "util/mutex.h"

namespace sagad::testing {
namespace {

double Millis(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

TEST(ReadersTest, OperatorsListingInALoopDoNotHoldUpSubmissions) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  sagad.Configure({{"api", {{"threads", 1}, {"history_readers", 1}}}});
  ASSERT_GT(sagad.Start(), 0);
  // 300 stored instances with a 16 KB note each: a search by an undeclared
  // field (address) examines
  // them all, about 5 MB to parse.
  nlohmann::json input = OrderInput();
  input["note"] = std::string(16 * 1024, 'n');
  for (int i = 0; i < 300; ++i) ASSERT_EQ(sagad.Submit("order_fulfilment", input).status, 201);

  const std::string list = "/v1/instances?input.address=nowhere&limit=500";
  std::atomic<bool> stop{false};
  std::atomic<int> lists{0};
  std::vector<double> list_ms;
  sagad::Mutex mu;
  std::vector<std::thread> operators;
  for (int k = 0; k < 3; ++k)
    operators.emplace_back([&] {
      while (!stop) {
        auto t0 = std::chrono::steady_clock::now();
        Reply r = sagad.Get(list);
        if (r.status != 200) continue;
        ++lists;
        sagad::MutexLock l(mu);
        list_ms.push_back(Millis(std::chrono::steady_clock::now() - t0));
      }
    });
  // Every operator has a list under way once one has finished; under a
  // sanitizer a list of 5 MB takes seconds, hence the long deadline.
  ASSERT_TRUE(WaitFor([&] { return lists >= 1; }, std::chrono::seconds(120)));
  std::vector<double> submit_ms;
  for (int i = 0; i < 20; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Reply r = sagad.Submit("order_fulfilment", OrderInput());
    EXPECT_EQ(r.status, 201) << r.raw;
    submit_ms.push_back(Millis(std::chrono::steady_clock::now() - t0));
  }
  stop = true;
  for (auto& t : operators) t.join();
  double lists_median;
  {
    sagad::MutexLock l(mu);
    lists_median = Median(list_ms);
  }
  const double submits_median = Median(submit_ms);
  std::cout << "submission " << submits_median << " ms, list " << lists_median << " ms (medians)\n";
  EXPECT_LT(submits_median, lists_median / 4)
      << "a submission took " << submits_median << " ms (median) while a list took " << lists_median
      << " ms";
}

// order_fulfilment declares customer and sku: a search by customer says
// it is indexed and finds exactly its instances; one by address (not
// declared) says it is not. Creation time bounds the list too.
TEST(ReadersTest, ADeclaredAttributeIsIndexedAndCreationTimeBoundsTheList) {
  TempDir dir;
  Downstream downstream;
  Coordinator sagad(downstream, dir.path() + "/data");
  ASSERT_GT(sagad.Start(), 0);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    nlohmann::json input = OrderInput();
    input["customer"] = i % 2 ? "c-7" : "c-9";
    Reply r = sagad.Submit("order_fulfilment", input);
    ASSERT_EQ(r.status, 201) << r.raw;
    ids.push_back(r.body["id"]);
  }
  Reply found;
  EXPECT_TRUE(WaitFor([&] {  // the declaration commits behind the start
    found = sagad.Get("/v1/instances?input.customer=c-9");
    return found.body.value("indexed", false);
  })) << found.raw;
  ASSERT_EQ(found.body["instances"].size(), 3u) << found.raw;
  EXPECT_EQ(found.body["instances"][0]["id"], ids[4]);
  Reply scanned = sagad.Get("/v1/instances?input.address=1%20Main%20St");
  EXPECT_FALSE(scanned.body.value("indexed", true)) << scanned.raw;
  EXPECT_EQ(scanned.body["instances"].size(), 5u);
  // Creation time: strictly after the second's, strictly before the last's.
  const int64_t second = sagad.Get("/v1/instances/" + ids[1]).body["created_at"];
  const int64_t last = sagad.Get("/v1/instances/" + ids[4]).body["created_at"];
  Reply bounded = sagad.Get("/v1/instances?created_after=" + std::to_string(second) +
                            "&created_before=" + std::to_string(last + 1));
  ASSERT_EQ(bounded.status, 200) << bounded.raw;
  for (const auto& i : bounded.body["instances"]) {
    EXPECT_GT(i["created_at"].get<int64_t>(), second);
    EXPECT_LE(i["created_at"].get<int64_t>(), last);
  }
  EXPECT_EQ(bounded.body["instances"][0]["id"], ids[4]);
  EXPECT_EQ(sagad.Get("/v1/instances?created_after=yesterday").status, 400);
}

}  // namespace
}  // namespace sagad::testing

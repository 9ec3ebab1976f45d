// Reads of the history never take the capacity of writes (issue 63): with
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
  // 300 stored instances with a 16 KB note each: a list that examines
  // them all parses about 5 MB.
  nlohmann::json input = OrderInput();
  input["note"] = std::string(16 * 1024, 'n');
  for (int i = 0; i < 300; ++i) ASSERT_EQ(sagad.Submit("order_fulfilment", input).status, 201);

  const std::string list = "/v1/instances?input.customer=nobody&limit=500";
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
  ASSERT_TRUE(WaitFor([&] { return lists >= 3; }));
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
  std::cout << "submission " << submits_median << " ms, list " << lists_median
            << " ms (medians)\n";
  EXPECT_LT(submits_median, lists_median / 4)
      << "a submission took " << submits_median << " ms (median) while a list took "
      << lists_median << " ms";
}

}  // namespace
}  // namespace sagad::testing

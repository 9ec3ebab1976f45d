#include "tests/testing/crash_matrix.h"

#include <chrono>

namespace sagad::testing {

void PrintTo(const CrashCase& c, std::ostream* os) {
  *os << c.point << ":" << c.n << (c.dedup ? " dedup" : " no-dedup");
}

std::string CrashCaseName(const ::testing::TestParamInfo<CrashCase>& info) {
  return info.param.point + "_" + std::to_string(info.param.n) +
         (info.param.dedup ? "_dedup" : "_no_dedup");
}

std::vector<CrashCase> CrashCases(int forward_n, int undo_from, int undo_to,
                                  const std::vector<bool>& undo_dedup) {
  std::vector<CrashCase> out;
  for (bool dedup : {true, false})
    for (const char* p : {"before_started", "after_started", "before_outcome", "after_outcome"})
      for (int n = 1; n <= forward_n; ++n) out.push_back({p, n, dedup, false});
  for (bool dedup : undo_dedup)
    for (const char* p : {"before_compensation_started", "after_compensation_started",
                          "before_compensation_outcome", "after_compensation_outcome"})
      for (int n = undo_from; n <= undo_to; ++n) out.push_back({p, n, dedup, true});
  return out;
}

nlohmann::json ServicesFor(const CrashCase& c, const std::vector<std::string>& services) {
  return c.dedup ? nlohmann::json::object() : NonDeduplicating(services);
}

CrashingSagad::CrashingSagad(Coordinator& sagad, const CrashCase& c) : sagad_(sagad) {
  EXPECT_GT(sagad_.Start(c.point + ":" + std::to_string(c.n)), 0) << "sagad did not come up";
}

void CrashingSagad::Restart(bool must_have_died) {
  if (crashed_) return;
  if (!must_have_died && sagad_.process().Running()) return;
  ASSERT_EQ(sagad_.process().Wait(), 75) << "sagad ended, but not at the crash point";
  crashed_ = true;
  ASSERT_GT(sagad_.Start(), 0) << "sagad did not come up again";
}

bool CrashingSagad::Reached() {
  if (!crashed_) {
    WaitFor([&] { return !sagad_.process().Running(); }, std::chrono::seconds(5));
    Restart(/*must_have_died=*/false);
  }
  return crashed_;
}

void ExpectEffects(Downstream& downstream, int total, const std::vector<std::string>& once,
                   const std::vector<std::string>& never) {
  EXPECT_EQ(RepeatedEffects(downstream), "");
  const nlohmann::json e = downstream.Effects();
  EXPECT_EQ(e["total"], total) << e.dump();
  for (const std::string& route : once) EXPECT_EQ(e["by_route"].value(route, 0), 1) << route;
  for (const std::string& route : never) EXPECT_EQ(e["by_route"].value(route, 0), 0) << route;
}

}  // namespace sagad::testing

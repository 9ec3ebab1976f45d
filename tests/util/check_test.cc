// SAGAD_CHECK stays on in a release build: this file is compiled with NDEBUG.
#ifndef NDEBUG
#define NDEBUG
#endif
#include "util/check.h"

#include <gtest/gtest.h>

#include "util/status.h"

namespace sagad {
namespace {

TEST(CheckDeathTest, ABrokenInvariantAbortsNamingTheConditionAndTheContextEvenWithNdebug) {
  int step = 3;
  EXPECT_DEATH(SAGAD_CHECK(step < 2) << "step " << step << " under way twice",
               "invariant broken at .*check_test.cc:[0-9]+: step < 2: step 3 under way twice");
}

TEST(CheckTest, AHoldingInvariantEvaluatesItsContextNever) {
  int evaluated = 0;
  auto context = [&] { return ++evaluated; };
  SAGAD_CHECK(1 + 1 == 2) << context();
  EXPECT_EQ(evaluated, 0);
}

TEST(StatusTest, EveryCodeHasAName) {
  for (StatusCode c : {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound,
                       StatusCode::kAlreadyExists, StatusCode::kFailedPrecondition,
                       StatusCode::kAborted, StatusCode::kUnavailable, StatusCode::kInternal,
                       StatusCode::kLeaseLost, StatusCode::kMovedOn})
    EXPECT_STRNE(StatusCodeName(c), "UNKNOWN_CODE");
  EXPECT_EQ(MovedOn("x").ToString(), "MOVED_ON: x");
  EXPECT_EQ(Aborted("y").code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace sagad

#include "coordinator/engine/steps/step_request.h"

#include <gtest/gtest.h>

#include "adapters/sha256.h"
#include "tests/coordinator/engine/turns_fixture.h"

namespace sagad {
namespace {

using StepRequestTest = testing::TurnsFixture;

TEST_F(StepRequestTest, APathAndBodyAreRenderedFromInputAndResultsAndHashedTogether) {
  auto r = RenderStepRequest(inst_, def_.steps[0].forward);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->path, "/reservations");
  EXPECT_EQ(r->body, nlohmann::json({{"sku", "kit-1"}}));
  EXPECT_EQ(r->hash, Sha256Hex("POST /reservations\n" + CanonicalJson(r->body)));
  Commit(0, "r-7");
  auto undo = RenderStepRequest(inst_, *def_.steps[0].compensation);
  ASSERT_TRUE(undo.ok()) << undo.status().ToString();
  EXPECT_EQ(undo->path, "/reservations/r-7/release");
  EXPECT_NE(undo->hash, r->hash);
}

TEST_F(StepRequestTest, AValueThatIsNotThereIsNeverRendered) {
  // charge's body names reserve's reference, which does not exist yet.
  auto r = RenderStepRequest(inst_, def_.steps[1].forward);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("reserve.ref"), std::string::npos) << r.status().message();
}

TEST_F(StepRequestTest, TheSameRequestHashesTheSame) {
  Commit(0, "r-7");
  auto a = RenderStepRequest(inst_, def_.steps[1].forward);
  auto b = RenderStepRequest(inst_, def_.steps[1].forward);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->hash, b->hash);
  EXPECT_EQ(a->body, nlohmann::json({{"for", "r-7"}}));
}

}  // namespace
}  // namespace sagad

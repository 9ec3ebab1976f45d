#include "coordinator/engine/instances/definition_registry.h"

#include <gtest/gtest.h>

#include "examples/examples.h"

namespace sagad {
namespace {

TEST(DefinitionRegistryTest, SameVersionMustBeTheSameDefinition) {
  DefinitionRegistry defs;
  SagaDefinition v1 = IncidentResponse();
  ASSERT_TRUE(defs.Register(v1).ok());
  EXPECT_TRUE(defs.Register(v1).ok());  // a restart registers it again
  SagaDefinition changed = v1;
  changed.steps[0].forward.path = "/elsewhere";
  EXPECT_EQ(defs.Register(changed).code(), StatusCode::kAlreadyExists);
  changed.version = v1.version + 1;
  ASSERT_TRUE(defs.Register(changed).ok());
  EXPECT_EQ(defs.Get("incident_response", 0)->version, v1.version + 1);  // newest
  EXPECT_EQ(defs.Get("incident_response", v1.version)->steps[0].forward.path,
            v1.steps[0].forward.path);
  EXPECT_EQ(defs.Get("incident_response", 99), nullptr);
  EXPECT_EQ(defs.Get("nope", 0), nullptr);
  EXPECT_EQ(defs.All().size(), 2u);
  SagaDefinition bad = v1;
  bad.name = "bad";
  bad.steps.clear();
  EXPECT_EQ(defs.Register(bad).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sagad

#include "coordinator/server/definitions_dir.h"

#include <gtest/gtest.h>

#include <fstream>

#include "examples/examples.h"
#include "tests/testing/subprocess.h"

namespace sagad {
namespace {

TEST(DefinitionsDirTest, ShippedJsonExamplesEqualTheCppDeclarations) {
  std::vector<ToolboxDefinition> toolboxes;
  auto defs = LoadDefinitionsDir(SAGAD_SOURCE_DIR "/examples/definitions", &toolboxes);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 3u);
  EXPECT_EQ((*defs)[0], IncidentResponse());
  EXPECT_EQ((*defs)[1], OrderFulfilment());
  EXPECT_EQ((*defs)[2], TripBooking());
  ASSERT_EQ(toolboxes.size(), 1u);
  EXPECT_EQ(toolboxes[0], SocTools());
}

TEST(DefinitionsDirTest, AToolboxFileIsRefusedWhereToolboxesAreNotTaken) {
  auto defs = LoadDefinitionsDir(SAGAD_SOURCE_DIR "/examples/definitions");
  ASSERT_FALSE(defs.ok());
  EXPECT_NE(defs.status().message().find("soc_tools.json"), std::string::npos);
}

TEST(DefinitionsDirTest, ABadFileIsNamedInTheError) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/a.json") << IncidentResponse().ToJson().dump();
  std::ofstream(dir.path() + "/broken.json") << R"({"name": "x", "steps": [{"name": "s",
      "forward": {"service": "svc", "path": "/a/{{nope.ref}}"}, "irreversible": true}]})";
  auto defs = LoadDefinitionsDir(dir.path());
  ASSERT_FALSE(defs.ok());
  EXPECT_NE(defs.status().message().find("broken.json"), std::string::npos);
  EXPECT_NE(defs.status().message().find("unknown step 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace sagad

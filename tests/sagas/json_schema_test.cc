// InputSchema against the official JSON-Schema-Test-Suite (Debian package
// json-schema-test-suite, which carries drafts 3 to 7). Its draft-7 files
// for the keywords of the subset mean the same in 2020-12, except "items"
// given as an array (tuple validation, "prefixItems" in 2020-12), which the
// subset does not have. A group whose schema uses a keyword outside the
// subset must be refused by Compile, naming the keyword; those groups are
// counted as skipped and listed. No case of a group that compiles is
// skipped, except the ones in kSkipped below, each with its reason.
#include "sagas/json_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "sagas/schema_errors.h"

namespace sagad {
namespace {

const char* kSuite = "/usr/share/json-schema-test-suite/tests/draft7/";

// "file: group description: case description" -> why it is skipped. Empty:
// every case of every group that compiles passes.
const std::map<std::string, std::string> kSkipped = {};

struct Tally {
  int cases = 0, groups_refused = 0;
  std::vector<std::string> refused;
};

void RunFile(const std::string& file, Tally* t) {
  std::ifstream in(kSuite + file);
  ASSERT_TRUE(in) << "missing " << kSuite << file << " (install json-schema-test-suite)";
  nlohmann::json groups = nlohmann::json::parse(in);
  for (const auto& g : groups) {
    const std::string group = file + ": " + g.value("description", "");
    auto schema = InputSchema::Compile(g["schema"]);
    if (!schema.ok()) {
      // Only a keyword or form outside the subset may be refused.
      EXPECT_TRUE(schema.status().message().find("not supported") != std::string::npos ||
                  schema.status().message().find("must be an object or a boolean") !=
                      std::string::npos)
          << group << ": " << schema.status().message();
      ++t->groups_refused;
      t->refused.push_back(group + " (" + schema.status().message() + ")");
      continue;
    }
    for (const auto& c : g["tests"]) {
      const std::string name = group + ": " + c.value("description", "");
      if (kSkipped.count(name)) continue;
      bool valid = schema->Check(c["data"]).empty();
      EXPECT_EQ(valid, c["valid"].get<bool>())
          << name << "\n  schema " << g["schema"].dump() << "\n  data " << c["data"].dump();
      ++t->cases;
    }
  }
}

TEST(InputSchemaTest, PassesTheOfficialTestSuiteForEveryKeywordOfTheSubset) {
  Tally t;
  for (const char* f :
       {"type.json", "properties.json", "required.json", "additionalProperties.json", "enum.json",
        "const.json", "minimum.json", "maximum.json", "exclusiveMinimum.json",
        "exclusiveMaximum.json", "minLength.json", "maxLength.json", "pattern.json", "items.json",
        "minItems.json", "maxItems.json", "boolean_schema.json"})
    RunFile(f, &t);
  for (const auto& r : t.refused) std::cout << "refused (outside the subset): " << r << "\n";
  std::cout << t.cases << " cases run, " << t.groups_refused << " groups refused\n";
  EXPECT_GE(t.cases, 160);         // 166 with the package of Debian 12
  EXPECT_LE(t.groups_refused, 5);  // patternProperties (3), array-form items (2)
}

TEST(InputSchemaTest, AKeywordOutsideTheSubsetIsRefusedByName) {
  auto s = InputSchema::Compile(
      {{"type", "object"}, {"properties", {{"amount", {{"type", "number"}, {"multipleOf", 5}}}}}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'multipleOf'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("/properties/amount"), std::string::npos)
      << s.status().message();
}

TEST(InputSchemaTest, EveryViolationIsReportedWithItsPath) {
  auto s = InputSchema::Compile({{"type", "object"},
                                 {"required", {"amount", "currency"}},
                                 {"properties",
                                  {{"amount", {{"type", "number"}, {"exclusiveMinimum", 0}}},
                                   {"currency", {{"enum", {"EUR", "USD"}}}}}}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->Check({{"amount", 10}, {"currency", "EUR"}}).empty());
  auto lots = s->Check({{"amount", "lots"}, {"currency", "EUR"}});
  ASSERT_EQ(lots.size(), 1u);
  EXPECT_EQ(lots[0].path, "/amount");
  EXPECT_EQ(lots[0].message, "must be of type number");
  auto minus = s->Check({{"amount", -5}});
  ASSERT_EQ(minus.size(), 2u);
  EXPECT_EQ(minus[0].path, "/currency");
  EXPECT_EQ(minus[0].message, "is required");
  EXPECT_EQ(minus[1].path, "/amount");
  EXPECT_EQ(minus[1].message, "must be greater than 0");
}

// Regression: a backtracking matcher took 4 s for `^(a+)+$` over 27
// characters (hours for 40). Each check below is exponential for a
// backtracking matcher and linear for RE2: it ends at once, or the test
// times out.
TEST(InputSchemaTest, APatternIsMatchedInLinearTimeWhateverItsShape) {
  for (const char* pattern : {"^(a+)+$", "^(a|a)*$", "^(a|aa)+$", "^([a-z]+)*[0-9]$"}) {
    auto s = InputSchema::Compile({{"type", "string"}, {"pattern", pattern}});
    ASSERT_TRUE(s.ok()) << pattern << ": " << s.status().ToString();
    EXPECT_FALSE(s->Check(std::string(1000, 'a') + "!").empty()) << pattern;
    EXPECT_TRUE(s->Check(std::string(pattern).find("[0-9]") != std::string::npos
                             ? std::string(900, 'a') + "1"
                             : std::string(900, 'a'))
                    .empty())
        << pattern;
  }
}

TEST(InputSchemaTest, APatternThatNeedsBacktrackingIsRefusedAtRegistration) {
  for (const char* pattern : {"^(a)\\1$", "^(?=a)a$", "^a(?!b)"}) {
    auto s = InputSchema::Compile({{"type", "string"}, {"pattern", pattern}});
    ASSERT_FALSE(s.ok()) << pattern;
    EXPECT_NE(s.status().message().find("not supported"), std::string::npos)
        << s.status().message();
  }
}

// One wording for the API's problem and the engine's refusal: the empty
// path named as the value, at most `at_most` errors, then "...".
TEST(SchemaErrorsTest, EachErrorIsItsPathAndMessageTheWholeValueNamed) {
  const std::vector<SchemaError> errors = {
      {"", "must be an object"}, {"/host", "is required"}, {"/port", "must be an integer"}};
  EXPECT_EQ(DescribeSchemaErrors(errors, "input"),
            "input must be an object; /host is required; /port must be an integer");
  EXPECT_EQ(DescribeSchemaErrors(errors, "input", 2),
            "input must be an object; /host is required; ...");
  EXPECT_EQ(DescribeSchemaErrors({}, "input"), "");
}

}  // namespace
}  // namespace sagad

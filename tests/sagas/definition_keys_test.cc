// The reference of JSON keys in docs/defining-sagas.md is the parser's own
// table (sagas/definition_keys.h): a key added to one and not the other
// fails here.
#include "sagas/definition_keys.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace sagad {
namespace {

// "### level" -> the `key`s of the first column of its table, within the
// section "## JSON keys, level by level".
std::map<std::string, std::set<std::string>> DocumentedKeys() {
  std::ifstream in(std::string(SAGAD_SOURCE_DIR) + "/docs/defining-sagas.md");
  std::map<std::string, std::set<std::string>> out;
  std::string line, level;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## JSON keys, level by level";
    if (!in_section) continue;
    if (line.rfind("### ", 0) == 0) level = line.substr(4);
    if (line.rfind("| `", 0) == 0 && !level.empty()) {
      size_t end = line.find('`', 3);
      out[level].insert(line.substr(3, end - 3));
    }
  }
  return out;
}

TEST(DefinitionKeysTest, TheDocsListEveryKeyTheParserTakesAndNoOther) {
  auto documented = DocumentedKeys();
  ASSERT_FALSE(documented.empty()) << "no reference section in docs/defining-sagas.md";
  std::set<std::string> levels;
  for (const DefinitionKeys* k : AllDefinitionKeys()) {
    levels.insert(k->level);
    std::set<std::string> parsed(k->keys.begin(), k->keys.end());
    EXPECT_EQ(documented[k->level], parsed) << "level " << k->level;
  }
  for (const auto& [level, keys] : documented)
    EXPECT_TRUE(levels.count(level)) << "the docs document a level the parser lacks: " << level;
}

}  // namespace
}  // namespace sagad

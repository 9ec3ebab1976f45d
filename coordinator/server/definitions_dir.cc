#include "coordinator/server/definitions_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/json_limits.h"

namespace sagad {

StatusOr<std::vector<SagaDefinition>> LoadDefinitionsDir(
    const std::string& dir, std::vector<ToolboxDefinition>* toolboxes) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  if (ec) return InvalidArgument("cannot read definitions dir " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<SagaDefinition> out;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) return InvalidArgument(f.string() + ": not valid JSON");
    if (std::string at = DuplicateKey(ss.str()); !at.empty())
      return InvalidArgument(f.string() + ": key " + at + " appears twice");
    if (IsToolboxJson(j)) {
      if (!toolboxes) return InvalidArgument(f.string() + ": a toolbox is not taken here");
      auto tb = ToolboxDefinition::FromJson(j);
      if (!tb.ok()) return InvalidArgument(f.string() + ": " + tb.status().message());
      toolboxes->push_back(std::move(*tb));
      continue;
    }
    auto def = SagaDefinition::FromJson(j);
    if (!def.ok()) return InvalidArgument(f.string() + ": " + def.status().message());
    out.push_back(std::move(*def));
  }
  return out;
}

}  // namespace sagad

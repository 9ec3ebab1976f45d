#include "sagas/search_attributes.h"

#include <set>

#include "sagas/definition.h"
#include "util/json_limits.h"

namespace sagad {

bool SplitSearchAttribute(const std::string& name, std::string* field) {
  const bool metadata = name.rfind(kMetadataAttributePrefix, 0) == 0;
  *field = metadata ? name.substr(sizeof kMetadataAttributePrefix - 1) : name;
  return metadata;
}

Status ValidateSearchAttributes(const std::vector<std::string>& fields, const std::string& where,
                                bool metadata) {
  if (fields.size() > kMaxSearchAttributes)
    return InvalidArgument(where + ": at most " + std::to_string(kMaxSearchAttributes) +
                           " search_attributes");
  std::set<std::string> seen;
  for (const std::string& f : fields) {
    std::string field;
    const bool in_metadata = SplitSearchAttribute(f, &field);
    if (in_metadata && !metadata)
      return InvalidArgument(where + ": search_attributes name input fields; '" + SanitizeUtf8(f) +
                             "' names run metadata, which only a toolbox has");
    if (!IsDefinitionName(field))
      return InvalidArgument(where + ": a search attribute is a top-level " +
                             (metadata ? "input field or metadata.FIELD" : "input field") +
                             " name, 1-64 of [A-Za-z0-9_-], got '" + SanitizeUtf8(f) + "'");
    if (!seen.insert(f).second)
      return InvalidArgument(where + ": search attribute '" + f + "' is named twice");
  }
  return Status::Ok();
}

Status SearchAttributesFromJson(const nlohmann::json& definition, const std::string& where,
                                std::vector<std::string>* out) {
  out->clear();
  auto it = definition.find("search_attributes");
  if (it == definition.end() || it->is_null()) return Status::Ok();
  if (!it->is_array())
    return InvalidArgument(where + ": search_attributes must be an array of field names");
  for (const auto& f : *it) {
    if (!f.is_string())
      return InvalidArgument(where + ": search_attributes must be an array of field names");
    out->push_back(f.get<std::string>());
  }
  return Status::Ok();
}

}  // namespace sagad

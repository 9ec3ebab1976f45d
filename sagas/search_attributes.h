// Search attributes: the fields of an instance's input (and, for a
// toolbox, of a run's metadata: "metadata.FIELD") that users search by,
// declared by a definition (`"search_attributes": ["customer", "sku"]`).
// A store indexes every instance of the saga by them, so that
// `GET /v1/instances?input.customer=c-9` is answered from an index instead
// of a bounded scan. Each is a top-level field name, 1-64 of
// [A-Za-z0-9_-]; at most kMaxSearchAttributes, none twice.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace sagad {

constexpr size_t kMaxSearchAttributes = 16;
// The prefix of a run metadata field among a toolbox's search attributes.
constexpr char kMetadataAttributePrefix[] = "metadata.";

// Where declared attribute `name` lives: true for a run's metadata
// ("metadata.agent": *field "agent"), false for the input ("customer").
bool SplitSearchAttribute(const std::string& name, std::string* field);
// `where` starts the message ("saga 'x'"); `metadata`: "metadata.F" allowed
// (a toolbox).
Status ValidateSearchAttributes(const std::vector<std::string>& fields, const std::string& where,
                                bool metadata);
// The "search_attributes" member of a definition's JSON, if any, into
// *out: an array of strings (what they say is Validate's, as for a
// definition built in C++).
Status SearchAttributesFromJson(const nlohmann::json& definition, const std::string& where,
                                std::vector<std::string>* out);

}  // namespace sagad

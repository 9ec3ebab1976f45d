// sagactl's parts (private to coordinator/cli/): the parsed command line,
// one-line errors, tables, and the commands that read a store directly
// (sagactl_store.cc). sagactl.cc holds main and the commands over HTTP.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sagactl {

using nlohmann::json;

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  bool Has(const std::string& f) const { return flags.count(f) > 0; }
  std::string Get(const std::string& f, const std::string& def = "") const {
    auto it = flags.find(f);
    return it == flags.end() ? def : it->second;
  }
};

// Prints "sagactl: MSG" on stderr and exits with `code` (1: a refused
// request or unreachable server; 2: bad usage).
[[noreturn]] void Die(const std::string& msg, int code = 1);

// Times as UTC text, values as table cells, and the tables themselves.
std::string Time(int64_t ms);
std::string Str(const json& j);
void Table(const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows);
void PrintInstance(const json& instance);
void PrintList(const json& instances, const json& next);
void PrintEvents(const json& events);
// A definition's steps as Graphviz dot, or as a Mermaid flowchart.
std::string GraphDot(const json& definition);
std::string GraphMermaid(const json& definition);

// The commands that read a store directly (sagactl_store.cc): read-only on
// an LMDB data dir that must exist, or a PostgreSQL store.
int Verify(const Args& a);
int Export(const Args& a);
int Inspect(const Args& a, bool as_json);
// verify-receipt FILE: checks a receipt's hash chain offline; exit 1 naming
// the first entry that does not hold.
int VerifyReceiptFile(const Args& a);

}  // namespace sagactl

#include "coordinator/sim/bugs.h"

namespace sagad::sim {
namespace {

struct Named {
  const char* name;
  Bug bug;
};

const Named kBugs[] = {{"refusal-as-success", Bug::kRefusalAsSuccess},
                       {"timeout-as-not-sent", Bug::kTimeoutAsNotSent},
                       {"two-owners", Bug::kTwoOwners},
                       {"lying-fsync", Bug::kLyingFsync}};

}  // namespace

bool ParseBug(const std::string& name, Bug* out) {
  if (name.empty()) return *out = Bug::kNone, true;
  for (const Named& n : kBugs)
    if (name == n.name) return *out = n.bug, true;
  return false;
}

std::vector<std::string> BugNames() {
  std::vector<std::string> out;
  for (const Named& n : kBugs) out.push_back(n.name);
  return out;
}

}  // namespace sagad::sim

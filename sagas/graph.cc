#include "sagas/graph.h"

#include <set>

#include "sagas/definition.h"

namespace sagad {

StatusOr<StepGraph> StepGraph::Of(const SagaDefinition& def) {
  const int n = static_cast<int>(def.steps.size());
  StepGraph g;
  g.deps_.resize(n);
  for (int i = 0; i < n; ++i) {
    const StepDefinition& st = def.steps[i];
    if (!st.after) {
      if (i > 0) g.deps_[i].push_back(i - 1);
      continue;
    }
    std::set<std::string> seen;
    for (const std::string& name : *st.after) {
      if (!seen.insert(name).second)
        return InvalidArgument("step '" + st.name + "' lists '" + name + "' twice in after");
      int d = def.StepIndex(name);
      if (d < 0)
        return InvalidArgument("step '" + st.name + "' comes after unknown step '" + name + "'");
      if (d == i) return InvalidArgument("step '" + st.name + "' comes after itself");
      g.deps_[i].push_back(d);
    }
  }
  // Kahn's algorithm, lowest index first: a stable topological order, and
  // whatever it cannot place lies on a cycle.
  std::vector<int> pending(n);
  std::vector<std::vector<int>> dependents(n);
  for (int i = 0; i < n; ++i) {
    pending[i] = static_cast<int>(g.deps_[i].size());
    for (int d : g.deps_[i]) dependents[d].push_back(i);
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.insert(i);
  while (!ready.empty()) {
    int i = *ready.begin();
    ready.erase(ready.begin());
    g.order_.push_back(i);
    for (int k : dependents[i])
      if (--pending[k] == 0) ready.insert(k);
  }
  if (static_cast<int>(g.order_.size()) != n) {
    // Name the cycle: walk dependencies from a step left over until one repeats.
    int at = -1;
    for (int i = 0; i < n && at < 0; ++i)
      if (pending[i] > 0) at = i;
    std::vector<int> path;
    std::vector<int> pos(n, -1);
    while (pos[at] < 0) {
      pos[at] = static_cast<int>(path.size());
      path.push_back(at);
      for (int d : g.deps_[at])
        if (pending[d] > 0) {
          at = d;
          break;
        }
    }
    std::string cycle;
    for (size_t k = pos[at]; k < path.size(); ++k) cycle += def.steps[path[k]].name + " -> ";
    return InvalidArgument("steps form a cycle (each waits for the next): " + cycle +
                           def.steps[at].name);
  }
  g.ancestors_.assign(n, std::vector<char>(n, 0));
  for (int i : g.order_)
    for (int d : g.deps_[i]) {
      g.ancestors_[i][d] = 1;
      for (int a = 0; a < n; ++a)
        if (g.ancestors_[d][a]) g.ancestors_[i][a] = 1;
    }
  return g;
}

bool StepGraph::IsCutPoint(int i) const {
  for (int k = 0; k < size(); ++k)
    if (k != i && !IsAncestor(k, i) && !IsAncestor(i, k)) return false;
  return true;
}

}  // namespace sagad

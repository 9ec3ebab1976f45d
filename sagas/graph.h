// StepGraph: the dependency graph of a saga's steps.
//
// A step runs after the steps named in its `after` list (SagaDefinition);
// without one, after the step declared before it (so a plain list of steps
// is the chain it always was), and `after: []` makes a root. The graph is a
// DAG: Of() refuses an unknown, duplicate or self dependency and a cycle,
// naming the steps. Indices are those of SagaDefinition::steps.
// Thread-safety: immutable after construction.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace sagad {

struct SagaDefinition;

class StepGraph {
 public:
  // Builds and checks the graph of `def`; InvalidArgument with a one-line
  // reason naming the steps.
  static StatusOr<StepGraph> Of(const SagaDefinition& def);

  int size() const { return static_cast<int>(deps_.size()); }
  // Direct dependencies of step i, in declared order.
  const std::vector<int>& deps(int i) const { return deps_[i]; }
  // True if `a` must commit before `b` may start (directly or not).
  bool IsAncestor(int a, int b) const { return ancestors_[b][a] != 0; }
  // Every other step is an ancestor or a descendant of `i`: nothing can run
  // beside it.
  bool IsCutPoint(int i) const;
  // The steps in an order where every step comes after its dependencies
  // (declaration order breaks ties).
  const std::vector<int>& topological_order() const { return order_; }

 private:
  std::vector<std::vector<int>> deps_;
  std::vector<std::vector<char>> ancestors_;  // ancestors_[b][a]: a before b
  std::vector<int> order_;
};

}  // namespace sagad

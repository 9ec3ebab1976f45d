// AncestorsOfAny: which steps must commit before some step of a set, found
// in one walk over the dependency lists.
//
// `steps[i].after` lists the direct dependencies of step i (an acyclic
// graph, as StepGraph checks at registration). out[a] != 0 when step `a`
// is a strict ancestor of some step b with of(b). Linear in steps and
// edges: the views and the planner ask it once per look at an instance,
// where a test of every pair would cost a walk per pair (a graph of 256
// steps and 4,096 dependencies took seconds per view).
#pragma once

#include <vector>

namespace sagad {

template <typename Steps, typename Pred>
std::vector<char> AncestorsOfAny(const Steps& steps, Pred of) {
  std::vector<char> out(steps.size(), 0);
  std::vector<int> stack;
  for (size_t b = 0; b < steps.size(); ++b)
    if (of(static_cast<int>(b)))
      stack.insert(stack.end(), steps[b].after.begin(), steps[b].after.end());
  while (!stack.empty()) {
    int k = stack.back();
    stack.pop_back();
    if (out[k]) continue;
    out[k] = 1;
    stack.insert(stack.end(), steps[k].after.begin(), steps[k].after.end());
  }
  return out;
}

}  // namespace sagad

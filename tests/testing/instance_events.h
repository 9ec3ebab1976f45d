// Drives an Instance through events as the engine would commit them, for the
// tests of the pure model (planner, graphs, operator rules): a fixture
// derives from it and calls Create, then Step and Saga.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "sagas/instance.h"

namespace sagad::testing {

class InstanceEvents {
 protected:
  // A new instance "i1" of `def` with `input`.
  void Create(const SagaDefinition& def, const nlohmann::json& input) {
    inst_ = Instance();
    Event e = Instance::CreatedEvent("i1", def, input);
    e.seq = 1;
    ASSERT_TRUE(inst_.Apply(e).ok());
  }
  void Step(const std::string& step, StepEvent ev) { Add(step, StepEventName(ev)); }
  void Saga(SagaEvent ev) { Add("", SagaEventName(ev)); }
  // The next event of `type` (for `step`, or the saga's when empty).
  void Add(const std::string& step, const std::string& type) {
    Event e;
    e.seq = inst_.last_seq() + 1;
    e.type = type;
    e.step = step;
    Status s = inst_.Apply(e);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  Instance inst_;
};

}  // namespace sagad::testing

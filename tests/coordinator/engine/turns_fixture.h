// A three-step saga (reserve -> charge, the pivot -> ship) and one instance
// of it, for the tests of what a transition does (saga_turns, step_request).
#pragma once

#include <gtest/gtest.h>

#include "coordinator/engine/instances/transition.h"
#include "sagas/definition.h"
#include "sagas/instance.h"

namespace sagad::testing {

class TurnsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto def = SagaBuilder("turns", 1)
                   .Input({"sku"})
                   .Step("reserve")
                   .Call("inventory", "POST", "/reservations", {{"sku", "{{input.sku}}"}})
                   .Compensate("inventory", "POST", "/reservations/{{reserve.ref}}/release")
                   .Step("charge")
                   .Call("payments", "POST", "/charges", {{"for", "{{reserve.ref}}"}})
                   .Irreversible()
                   .Step("ship")
                   .Call("shipping", "POST", "/shipments", nlohmann::json::object())
                   .Idempotent(true)
                   .Build();
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    def_ = *def;
    Event created = Instance::CreatedEvent("i1", def_, {{"sku", "kit-1"}});
    created.seq = 1;
    ASSERT_TRUE(inst_.Apply(created).ok());
  }
  // Step i sent and committed with `ref`.
  void Commit(int i, const std::string& ref) {
    Tx tx(inst_, 1000);
    ASSERT_TRUE(tx.Step(i, StepEvent::kStart, {{"key", "i1:" + def_.steps[i].name}}).ok());
    ASSERT_TRUE(
        tx.Step(i, StepEvent::kCommit, {{"result", {{"id", ref}}}, {"external_ref", ref}}).ok());
  }

  SagaDefinition def_;
  Instance inst_;
};

}  // namespace sagad::testing

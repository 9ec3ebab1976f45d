// SagaBuilder and StepBuilder: the C++ DSL that produces a SagaDefinition
// (sagas/definition.h), validated by Build().
#include "sagas/definition.h"

namespace sagad {

SagaBuilder::SagaBuilder(std::string name, int version) {
  def_.name = std::move(name);
  def_.version = version;
}

SagaBuilder& SagaBuilder::Deadline(int64_t ms) {
  def_.deadline_ms = ms;
  return *this;
}

SagaBuilder& SagaBuilder::MaxParallel(int n) {
  def_.max_parallel = n;
  return *this;
}

SagaBuilder& SagaBuilder::SearchAttributes(std::vector<std::string> fields) {
  def_.search_attributes = std::move(fields);
  return *this;
}

SagaBuilder& SagaBuilder::Input(std::vector<std::string> fields) {
  def_.input = std::move(fields);
  return *this;
}

SagaBuilder& SagaBuilder::InputSchema(nlohmann::json schema) {
  def_.input_schema = std::move(schema);
  auto compiled = sagad::InputSchema::Compile(def_.input_schema);
  def_.schema = compiled.ok() ? std::make_shared<const sagad::InputSchema>(std::move(*compiled))
                              : nullptr;  // Build() refuses it, naming the keyword
  return *this;
}

SagaBuilder& SagaBuilder::CompensationOrder(sagad::CompensationOrder order) {
  def_.compensation_order = order;
  return *this;
}

StepBuilder& SagaBuilder::Step(std::string name) {
  StepDefinition st;
  st.name = std::move(name);
  def_.steps.push_back(std::move(st));
  builders_.emplace_back(new StepBuilder(this, def_.steps.size() - 1));
  return *builders_.back();
}

StatusOr<SagaDefinition> SagaBuilder::Build() {
  SAGAD_RETURN_IF_ERROR(Validate(def_));
  return def_;
}

StepDefinition& StepBuilder::step() { return parent_->def_.steps[index_]; }

StepBuilder& StepBuilder::Call(std::string service, std::string method, std::string path,
                               nlohmann::json body) {
  step().forward =
      CallSpec{std::move(service), std::move(method), std::move(path), std::move(body)};
  return *this;
}

StepBuilder& StepBuilder::Compensate(std::string service, std::string method, std::string path,
                                     nlohmann::json body) {
  step().compensation =
      CallSpec{std::move(service), std::move(method), std::move(path), std::move(body)};
  return *this;
}

StepBuilder& StepBuilder::Irreversible() {
  step().irreversible = true;
  return *this;
}

StepBuilder& StepBuilder::RequiresApproval() {
  step().requires_approval = true;
  return *this;
}

StepBuilder& StepBuilder::RequiresApprovalIf(std::string field, std::string op,
                                             nlohmann::json value) {
  step().approval_if = ApprovalRule{std::move(field), std::move(op), std::move(value)};
  return *this;
}

StepBuilder& StepBuilder::ApprovalTimeout(int64_t ms, std::string action) {
  step().approval_timeout_ms = ms;
  step().approval_timeout_action = std::move(action);
  return *this;
}

StepBuilder& StepBuilder::Idempotent(bool on) {
  step().idempotent = on;
  return *this;
}

StepBuilder& StepBuilder::Queryable(bool on) {
  step().queryable = on;
  return *this;
}

StepBuilder& StepBuilder::Deadline(int64_t ms) {
  step().deadline_ms = ms;
  return *this;
}

StepBuilder& StepBuilder::AfterSteps(std::vector<std::string> names) {
  step().after = std::move(names);
  return *this;
}

StepBuilder& StepBuilder::Retry(RetryPolicy policy) {
  step().retry = policy;
  return *this;
}

StepBuilder& StepBuilder::Step(std::string name) { return parent_->Step(std::move(name)); }

StatusOr<SagaDefinition> StepBuilder::Build() { return parent_->Build(); }

}  // namespace sagad

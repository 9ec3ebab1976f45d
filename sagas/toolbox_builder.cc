// ToolboxBuilder and ToolBuilder: the C++ DSL that produces a
// ToolboxDefinition (sagas/toolbox.h), validated by Build().
#include "sagas/toolbox.h"

namespace sagad {

ToolboxBuilder::ToolboxBuilder(std::string name, int version) {
  tb_.name = std::move(name);
  tb_.version = version;
}

ToolboxBuilder& ToolboxBuilder::Description(std::string text) {
  tb_.description = std::move(text);
  return *this;
}

ToolboxBuilder& ToolboxBuilder::InputSchema(nlohmann::json schema) {
  tb_.input_schema = std::move(schema);
  auto compiled = sagad::InputSchema::Compile(tb_.input_schema);
  tb_.schema = compiled.ok() ? std::make_shared<const sagad::InputSchema>(std::move(*compiled))
                             : nullptr;  // Build() refuses it
  return *this;
}

ToolboxBuilder& ToolboxBuilder::SearchAttributes(std::vector<std::string> fields) {
  tb_.search_attributes = std::move(fields);
  return *this;
}

ToolboxBuilder& ToolboxBuilder::Guard(nlohmann::json guard) {
  guards_.push_back(std::move(guard));
  return *this;
}

ToolboxBuilder& ToolboxBuilder::IdleTimeout(int64_t seconds, std::string on_idle) {
  tb_.idle_timeout_s = seconds;
  tb_.on_idle = std::move(on_idle);
  return *this;
}

ToolboxBuilder& ToolboxBuilder::MaxCalls(int n) {
  tb_.max_calls = n;
  return *this;
}

ToolBuilder& ToolboxBuilder::Tool(std::string name, std::string description,
                                  nlohmann::json arguments_schema) {
  ToolDefinition t;
  t.step.name = std::move(name);
  t.description = std::move(description);
  t.arguments_schema = std::move(arguments_schema);
  if (!t.arguments_schema.is_null()) {
    auto compiled = sagad::InputSchema::Compile(t.arguments_schema);
    if (compiled.ok()) t.schema = std::make_shared<const sagad::InputSchema>(std::move(*compiled));
  }
  tb_.tools.push_back(std::move(t));
  builders_.push_back(std::unique_ptr<ToolBuilder>(new ToolBuilder(this, tb_.tools.size() - 1)));
  return *builders_.back();
}

StatusOr<ToolboxDefinition> ToolboxBuilder::Build() {
  if (Status s = GuardsFromJson({{"guards", guards_}}, tb_.tools, &tb_.guards); !s.ok())
    return InvalidArgument("toolbox '" + tb_.name + "': " + s.message());
  SAGAD_RETURN_IF_ERROR(Validate(tb_));
  if (!tb_.input_schema.is_null() && !tb_.schema)
    return sagad::InputSchema::Compile(tb_.input_schema).status();
  return tb_;
}

ToolDefinition& ToolBuilder::tool() { return parent_->tb_.tools[index_]; }

ToolBuilder& ToolBuilder::Call(std::string service, std::string method, std::string path,
                               nlohmann::json body) {
  tool().step.forward =
      CallSpec{std::move(service), std::move(method), std::move(path), std::move(body)};
  return *this;
}

ToolBuilder& ToolBuilder::Compensate(std::string service, std::string method, std::string path,
                                     nlohmann::json body) {
  tool().step.compensation =
      CallSpec{std::move(service), std::move(method), std::move(path), std::move(body)};
  return *this;
}

ToolBuilder& ToolBuilder::Irreversible() {
  tool().step.irreversible = true;
  return *this;
}

ToolBuilder& ToolBuilder::RequiresApproval() {
  tool().step.requires_approval = true;
  return *this;
}

ToolBuilder& ToolBuilder::RequiresApprovalIf(std::string field, std::string op,
                                             nlohmann::json value) {
  tool().step.approval_if = ApprovalRule{std::move(field), std::move(op), std::move(value)};
  return *this;
}

ToolBuilder& ToolBuilder::Retry(RetryPolicy policy) {
  tool().step.retry = policy;
  return *this;
}

ToolBuilder& ToolBuilder::Tool(std::string name, std::string description,
                               nlohmann::json arguments_schema) {
  return parent_->Tool(std::move(name), std::move(description), std::move(arguments_schema));
}

ToolBuilder& ToolBuilder::Guard(nlohmann::json guard) {
  parent_->Guard(std::move(guard));
  return *this;
}

StatusOr<ToolboxDefinition> ToolBuilder::Build() { return parent_->Build(); }

}  // namespace sagad

// libFuzzer: a saga definition or a toolbox (guards included) in JSON
// (sagad --definitions, the JSON form of the builders). Never a crash; what FromJson accepts
// survives ToJson/FromJson (input_schema included: compiled, not run here, since a pattern that
// backtracks exponentially would only time the fuzzer out).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sagas/definition.h"
#include "sagas/toolbox.h"
#include "util/json_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (!sagad::JsonDepthWithin(text)) return 0;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return 0;
  if (sagad::IsToolboxJson(j)) {
    auto tb = sagad::ToolboxDefinition::FromJson(j);
    if (!tb.ok()) return 0;
    auto back = sagad::ToolboxDefinition::FromJson(tb->ToJson());
    if (!back.ok() || !(*back == *tb)) std::abort();  // what was accepted must read back
    return 0;
  }
  auto def = sagad::SagaDefinition::FromJson(j);
  if (!def.ok()) return 0;
  auto again = sagad::SagaDefinition::FromJson(def->ToJson());
  if (!again.ok()) std::abort();  // what was accepted must read back
  (void)sagad::DumpJson(again->ToJson());
  return 0;
}

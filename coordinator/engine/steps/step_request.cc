#include "coordinator/engine/steps/step_request.h"

#include "adapters/sha256.h"
#include "sagas/template.h"

namespace sagad {

StatusOr<StepRequest> RenderStepRequest(const Instance& inst, const CallSpec& call) {
  TemplateContext ctx;
  ctx.input = &inst.input();
  // A step without an external ref has no "ref": {{step.ref}} is then
  // missing (the request is not rendered), never an empty string.
  // A run's call also shows its arguments ({{<call_id>.args.X}}: a tool's
  // {{args.X}}, sagas/toolbox.h).
  for (const auto& st : inst.steps()) {
    const bool call = st.call.is_object() && st.call.contains("arguments");
    if (st.result.is_null() && st.external_ref.empty() && !call) continue;
    nlohmann::json& seen = ctx.steps[st.name];
    seen = nlohmann::json::object();
    if (!st.result.is_null() || !st.external_ref.empty()) seen["result"] = st.result;
    if (!st.external_ref.empty()) seen["ref"] = st.external_ref;
    if (call) seen["args"] = st.call["arguments"];
  }
  auto path = RenderPath(call.path, ctx);
  if (!path.ok()) return path.status();
  auto body = RenderBody(call.body, ctx);
  if (!body.ok()) return body.status();
  return StepRequest{*path, *body,
                     Sha256Hex(call.method + " " + *path + "\n" + CanonicalJson(*body))};
}

}  // namespace sagad

#include "coordinator/engine/step_request.h"

#include "adapters/sha256.h"
#include "sagas/template.h"

namespace sagad {

StatusOr<StepRequest> RenderStepRequest(const Instance& inst, const CallSpec& call) {
  TemplateContext ctx;
  ctx.input = &inst.input();
  // A step without an external ref has no "ref": {{step.ref}} is then
  // missing (the request is not rendered), never an empty string.
  for (const auto& st : inst.steps()) {
    if (st.result.is_null() && st.external_ref.empty()) continue;
    nlohmann::json& seen = ctx.steps[st.name];
    seen = {{"result", st.result}};
    if (!st.external_ref.empty()) seen["ref"] = st.external_ref;
  }
  auto path = RenderPath(call.path, ctx);
  if (!path.ok()) return path.status();
  auto body = RenderBody(call.body, ctx);
  if (!body.ok()) return body.status();
  return StepRequest{*path, *body,
                     Sha256Hex(call.method + " " + *path + "\n" + CanonicalJson(*body))};
}

}  // namespace sagad

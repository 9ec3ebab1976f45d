#include "coordinator/step_request.h"

#include "adapters/sha256.h"
#include "sagas/template.h"

namespace sagad {

StatusOr<StepRequest> RenderStepRequest(const Instance& inst,
                                        const CallSpec& call) {
  TemplateContext ctx;
  ctx.input = &inst.input();
  for (const auto& st : inst.steps())
    if (!st.result.is_null() || !st.external_ref.empty())
      ctx.steps[st.name] = {{"ref", st.external_ref}, {"result", st.result}};
  auto path = RenderPath(call.path, ctx);
  if (!path.ok()) return path.status();
  auto body = RenderBody(call.body, ctx);
  if (!body.ok()) return body.status();
  return StepRequest{
      *path, *body,
      Sha256Hex(call.method + " " + *path + "\n" + CanonicalJson(*body))};
}

}  // namespace sagad

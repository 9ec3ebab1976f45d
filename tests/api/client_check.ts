// Compiled (never run) by tests/api/openapi_tools.sh against the types that
// openapi-typescript generates from sagad's OpenAPI document: a submission
// with input, and a typed read of the instance, must type-check.
import type { components, paths } from "./sagad-api";

type Submit = paths["/v1/sagas/{saga}/instances"]["post"];
type SubmitBody = NonNullable<Submit["requestBody"]>["content"]["application/json"];
type Created = Submit["responses"][201]["content"]["application/json"];
type Instance = components["schemas"]["Instance"];
type Problem = components["schemas"]["Problem"];
type Bulk = paths["/v1/instances/actions/approve"]["post"]["responses"][200]["content"]["application/json"];

export const submission: SubmitBody = {
  input: { order: "A-17", amount: 4200, lines: [{ sku: "SKU-1", qty: 2 }], gift: false },
};

export function describe(i: Created): string {
  const inst: Instance = i;
  const steps = inst.steps.map((s) => `${s.name}=${s.status}${s.external_ref ? " " + s.external_ref : ""}`);
  const cancel = inst.actions?.cancel;
  return `${inst.id} ${inst.saga} v${inst.saga_version} ${inst.status}: ${steps.join(", ")}` +
    (cancel && !cancel.allowed ? ` (cancel: ${cancel.reason ?? ""})` : "");
}

export function refused(p: Problem): string {
  return `${p.status} ${p.title}: ${p.detail}`;
}

export function accepted(b: Bulk): number {
  return b.results.filter((r) => r.http_status === 200).length;
}

// The official MCP TypeScript SDK client against sagad's POST /mcp: lists
// the tools of a run's toolbox, calls them, gets results and errors; a call
// whose connection is dropped and which is repeated with the same call_id
// takes effect once; a new client resumes the session (the run).
// Usage: node mcp_client.mjs SAGAD_URL SERVICES_URL TOKEN
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [api, services, token] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const url = new URL(`${api}/mcp?toolbox=soc_tools&input.incident=INC-MCP`);

async function connect(sessionId) {
  const client = new Client({ name: "sagad-mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers }, sessionId });
  await client.connect(transport);
  return { client, transport };
}

async function effects() {
  return (await fetch(`${services}/_effects`)).json();
}

const text = (r) => r.content.map((c) => c.text).join("");

await fetch(`${services}/_reset`, { method: "POST" });
const { client, transport } = await connect();
const run = transport.sessionId;
assert.ok(run, "the session id names the run");

const { tools } = await client.listTools();
assert.deepEqual(tools.map((t) => t.name).sort(),
  ["abort_run", "block_ip", "create_ticket", "disable_account", "finish_run", "notify_user"]);
for (const t of tools.filter((t) => !t.name.endsWith("_run"))) {
  assert.ok(t.inputSchema.required.includes("call_id"), `${t.name} needs a call_id`);
  assert.equal(t.annotations.idempotentHint, true);
  assert.equal(t.annotations.destructiveHint, t.name === "notify_user");
}

const ticket = await client.callTool({ name: "create_ticket", arguments: {
  call_id: "ticket", title: "Phishing", severity: "high", source_ip: "203.0.113.9" } });
assert.equal(ticket.isError, false, text(ticket));
assert.equal(JSON.parse(text(ticket)).source, "external");
const again = await client.callTool({ name: "create_ticket", arguments: {
  call_id: "ticket", title: "Phishing", severity: "high", source_ip: "203.0.113.9" } });
assert.equal(text(again), text(ticket), "the same call_id answers the first outcome");
assert.equal((await effects()).by_route.create_ticket, 1);

const bad = await client.callTool({ name: "block_ip", arguments: { call_id: "b0", address: "x" } });
assert.equal(bad.isError, true);
assert.match(text(bad), /ip/);
const noId = await client.callTool({ name: "block_ip", arguments: { ip: "203.0.113.9" } });
assert.equal(noId.isError, true);
await assert.rejects(client.callTool({ name: "format_disk", arguments: { call_id: "x" } }));

// A dropped connection: the reply of disable_account is lost (the client
// gives up before the slow service answers); the same call_id again takes
// effect once.
await fetch(`${services}/_faults`, { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ path: "/accounts/disable", action: "delay", delay_ms: 700 }) });
const abort = new AbortController();
setTimeout(() => abort.abort(), 100);
await assert.rejects(client.callTool({ name: "disable_account",
  arguments: { call_id: "disable", user: "bob" } }, undefined, { signal: abort.signal }));
let disabled;
for (let i = 0; i < 20; ++i) {
  disabled = await client.callTool({ name: "disable_account",
    arguments: { call_id: "disable", user: "bob" } });
  if (!/call again/.test(text(disabled))) break;
}
assert.equal(disabled.isError, false, text(disabled));
assert.equal(disabled.structuredContent.status, "COMMITTED");
assert.equal((await effects()).by_route.disable_account, 1);

const mail = await client.callTool({ name: "notify_user", arguments: {
  call_id: "mail", to: "bob@example.com", body: "done" } });
assert.equal(mail.isError, false);
assert.match(text(mail), /waiting for an operator/);
await client.close();

// A new client resumes the run by its session id.
const resumed = await connect(run);
assert.equal(resumed.transport.sessionId, run);
const same = await resumed.client.callTool({ name: "create_ticket", arguments: {
  call_id: "ticket", title: "Phishing", severity: "high", source_ip: "203.0.113.9" } });
assert.equal(text(same), text(ticket));
await resumed.client.close();
const view = await (await fetch(`${api}/v1/instances/${run}`, { headers })).json();
assert.deepEqual(view.calls.map((c) => [c.call_id, c.status]),
  [["ticket", "COMMITTED"], ["disable", "COMMITTED"], ["mail", "AWAITING_APPROVAL"]]);
assert.equal((await effects()).total, 2);
console.log("mcp ok: run", run);

// The official MCP TypeScript client v2 (@modelcontextprotocol/client,
// pinned in tests/package-lock.json) against sagad's POST /mcp in the
// 2026-07-28 revision: the client negotiates it with server/discover (pinned:
// anything else fails), opens a run by handle, calls a tool twice with one
// call_id (one effect), is refused another principal's handle, and
// finish_run completes the run. With `auto` the same client also lands in
// the modern era; a raw request with a header that lies is HeaderMismatch.
// Usage: node mcp_client_v2.mjs SAGAD_URL SERVICES_URL TOKEN OTHER_TOKEN
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [api, services, token, otherToken] = process.argv.slice(2);
const url = new URL(`${api}/mcp?toolbox=soc_tools`);

async function connect(bearer, mode) {
  const client = new Client({ name: "sagad-mcp-v2-test", version: "1.0.0" },
                            { versionNegotiation: { mode } });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${bearer}` } } });
  await client.connect(transport);
  return client;
}
const text = (r) => r.content.map((c) => c.text).join("");
const effects = async () => (await fetch(`${services}/_effects`)).json();

await fetch(`${services}/_reset`, { method: "POST" });
const client = await connect(token, { pin: "2026-07-28" });
const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
assert.deepEqual(names.slice(0, 3), ["open_run", "finish_run", "abort_run"]);
for (const t of tools.filter((t) => !["open_run", "finish_run", "abort_run"].includes(t.name))) {
  assert.ok(t.inputSchema.required.includes("run"), `${t.name} takes the run's handle`);
  assert.ok(t.inputSchema.required.includes("call_id"), `${t.name} takes a call_id`);
}

const opened = await client.callTool({ name: "open_run",
  arguments: { input: { incident: "INC-V2" }, key: "INC-V2" } });
assert.equal(opened.isError, false, text(opened));
const run = opened.structuredContent.run;
assert.match(run, /^[0-9a-f]{12}-[0-9a-f]{16}$/);
const again = await client.callTool({ name: "open_run",
  arguments: { input: { incident: "INC-V2" }, key: "INC-V2" } });
assert.equal(again.structuredContent.run, run, "the same key opens the same run");

const args = { run, call_id: "ticket", title: "Phishing", severity: "high",
               source_ip: "203.0.113.9" };
const ticket = await client.callTool({ name: "create_ticket", arguments: args });
assert.equal(ticket.isError, false, text(ticket));
const twice = await client.callTool({ name: "create_ticket", arguments: args });
assert.equal(text(twice), text(ticket), "the same call_id answers the first outcome");
assert.equal((await effects()).by_route.create_ticket, 1);

// Another principal's handle does not exist for it.
const other = await connect(otherToken, { pin: "2026-07-28" });
const stolen = await other.callTool({ name: "create_ticket",
  arguments: { ...args, call_id: "t2" } });
assert.equal(stolen.isError, true);
assert.match(text(stolen), /no run/);
await other.close();

const finished = await client.callTool({ name: "finish_run", arguments: { run } });
assert.equal(finished.isError, false, text(finished));
assert.equal(finished.structuredContent.status, "COMPLETED");
const view = await (await fetch(`${api}/v1/instances/${run}`,
  { headers: { Authorization: `Bearer ${token}` } })).json();
assert.equal(view.status, "COMPLETED");
await client.close();

// `auto` negotiates the modern era as well.
const auto = await connect(token, "auto");
assert.ok((await auto.listTools()).tools.some((t) => t.name === "open_run"),
  "auto lands in the 2026-07-28 era (open_run is its tool)");
await auto.close();

// Headers that say otherwise than the body: 400 HeaderMismatch (-32020).
const lie = await fetch(url, { method: "POST", headers: {
  Authorization: `Bearer ${token}`, "Content-Type": "application/json",
  Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
  "Mcp-Method": "tools/list" }, body: JSON.stringify({ jsonrpc: "2.0", id: 9,
  method: "tools/call", params: { name: "finish_run", arguments: { run },
  _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {} } } }) });
assert.equal(lie.status, 400);
assert.equal((await lie.json()).error.code, -32020);
// Tasks: a client that declares the extension gets a task for a call that
// waits for an operator; tasks/get is working until the operator decides,
// then completed with the call's result.
let rpcId = 100;
async function rpc(method, params, tasks = false) {
  const caps = tasks ? { extensions: { "io.modelcontextprotocol/tasks": {} } } : {};
  const body = { jsonrpc: "2.0", id: ++rpcId, method, params: { ...params, _meta: {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": caps } } };
  const headers = { Authorization: `Bearer ${token}`, "Content-Type": "application/json",
    Accept: "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": method };
  if (method === "tools/call") headers["Mcp-Name"] = params.name;
  const r = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  return (await r.json()).result;
}
const discovered = await rpc("server/discover", {});
assert.ok(discovered.capabilities.extensions["io.modelcontextprotocol/tasks"]);
const taskRun = (await rpc("tools/call", { name: "open_run",
  arguments: { input: { incident: "INC-TASK" } } })).structuredContent.run;
const mail = { run: taskRun, call_id: "mail", to: "bob@example.com", body: "done" };
const plain = await rpc("tools/call", { name: "notify_user", arguments: mail });
assert.equal(plain.resultType, "complete", "no task for a client without the extension");
const created = await rpc("tools/call", { name: "notify_user", arguments: mail }, true);
assert.equal(created.resultType, "task");
assert.equal(created.status, "working");
assert.equal(created.taskId, `${taskRun}:mail`);
assert.equal((await rpc("tasks/get", { taskId: created.taskId })).status, "working");
const approved = await fetch(`${api}/v1/instances/${taskRun}/steps/mail/approve`, {
  method: "POST", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
  body: "{}" });
assert.equal(approved.status, 200);
let done;
for (let i = 0; i < 100; ++i) {
  done = await rpc("tasks/get", { taskId: created.taskId });
  if (done.status !== "working") break;
  await new Promise((r) => setTimeout(r, 100));
}
assert.equal(done.status, "completed", JSON.stringify(done));
assert.equal(done.result.structuredContent.status, "COMMITTED");
assert.equal(done.resultType, "complete");
assert.ok((await rpc("tasks/get", { taskId: "nope" })) === undefined, "an unknown task is an error");
console.log("mcp v2 ok: run", run);

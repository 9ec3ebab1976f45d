// Lets the official MCP conformance suite (@modelcontextprotocol/conformance,
// test-only, pinned in tests/package-lock.json) run on Debian's Node 20:
// the suite imports fs.globSync (Node 22) for its tier-check command only,
// which the server scenarios never run. This loader hook takes that one
// import out of the suite's bundle and puts a stub in its place; nothing
// else of the suite changes. Usage: node --import ./node20_compat.mjs ...
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(`
export async function load(url, context, next) {
  const out = await next(url, context);
  if (!url.endsWith("/@modelcontextprotocol/conformance/dist/index.js")) return out;
  let src = String(out.source);
  const m = src.match(/globSync as (\\w+),/);
  if (!m) return out;
  src = src.replace(m[0], "");
  const shebang = src.startsWith("#!") ? src.slice(0, src.indexOf("\\n") + 1) : "";
  src = src.slice(shebang.length);
  src = shebang + "const " + m[1] + " = () => { throw new Error('fs.globSync needs Node 22'); };\\n" + src;
  return { ...out, source: src };
}`));

// A driver of the official TypeScript SDK's MCP client, for the
// gateway's end-to-end tests: node client.mjs URL < steps.json
//
// stdin is a JSON array of steps; stdout gets one JSON line per step:
//   {"op":"list"}                              -> {"tools":[{"name","digest","inputSchema"}]}
//   {"op":"call","name":N,"arguments":A}       -> {"ok":true,"content":[...],"isError":bool}
//                                                 or {"ok":false,"code":C,"message":M,"data":D}
//   {"op":"wait_changed","timeout_ms":T}       -> {"changed":true} once notifications/tools/list_changed
//                                                 arrived since the last wait (false on timeout)
//   {"op":"agent","name":N,"arguments":A}      -> a scripted agent: calls, and while the result is an
//                                                 error whose text says `send "K" instead of "B"`,
//                                                 renames B to K and calls again (at most 3 times):
//                                                 {"ok":..., "content", "isError", "tries":[text of each error]}
// A call's output has the result's _meta as "meta".
// Every line also has "ms", the time since the client started. The
// bearer token, if any, is TOOLAUDIT_TOKEN. Exit status 0 unless the
// client could not connect or a step was not understood.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const url = process.argv[2];
let input = "";
for await (const chunk of process.stdin) input += chunk;
const steps = JSON.parse(input);

const headers = {};
if (process.env.TOOLAUDIT_TOKEN) headers.Authorization = `Bearer ${process.env.TOOLAUDIT_TOKEN}`;
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "toolaudit-e2e", version: "1.0.0" });
let changed = 0;
let wake = null;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  changed++;
  if (wake) wake();
});
await client.connect(transport);

const t0 = Date.now();
const out = (v) => process.stdout.write(JSON.stringify({ ...v, ms: Date.now() - t0 }) + "\n");
for (const step of steps) {
  switch (step.op) {
    case "list": {
      const { tools } = await client.listTools();
      out({ tools: tools.map((t) => ({ name: t.name, digest: t._meta?.["io.toolaudit/digest"], inputSchema: t.inputSchema })) });
      break;
    }
    case "call": {
      try {
        const res = await client.callTool({ name: step.name, arguments: step.arguments });
        out({ ok: true, content: res.content, isError: !!res.isError, meta: res._meta });
      } catch (e) {
        out({ ok: false, code: e.code, message: e.message, data: e.data });
      }
      break;
    }
    case "agent": {
      // What a model would do with the text alone: no _meta, no codes.
      let args = { ...step.arguments };
      const tries = [];
      let res;
      try {
        for (;;) {
          res = await client.callTool({ name: step.name, arguments: args });
          const text = (res.content ?? []).map((c) => c.text ?? "").join("");
          const fix = res.isError && text.match(/send "([^"]+)" instead of "([^"]+)"/);
          if (!fix || tries.length === 3) break;
          tries.push(text);
          const [, key, bad] = fix;
          args[key] = args[bad];
          delete args[bad];
        }
        out({ ok: true, content: res.content, isError: !!res.isError, meta: res._meta, tries });
      } catch (e) {
        out({ ok: false, code: e.code, message: e.message, data: e.data, tries });
      }
      break;
    }
    case "wait_changed": {
      if (changed === 0) {
        let timer;
        await new Promise((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, step.timeout_ms ?? 10000);
        });
        clearTimeout(timer); // a pending timer would keep node running
        wake = null;
      }
      out({ changed: changed > 0 });
      changed = 0;
      break;
    }
    default:
      console.error(`unknown step ${JSON.stringify(step)}`);
      process.exit(2);
  }
}
await client.close();

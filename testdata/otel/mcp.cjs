'use strict';
// The official MCP TypeScript SDK's client instrumented by OpenInference
// (@arizeai/openinference-instrumentation-mcp), which records no span of
// its own: it puts the caller's trace context in each request's _meta, as
// the MCP semantic conventions carry it. The test's gateway reads it: its
// decision span joins this agent's trace.
const { flush, run } = require('./setup.cjs');
const { trace } = require('@opentelemetry/api');
const { MCPInstrumentation } = require('@arizeai/openinference-instrumentation-mcp');
const streamable = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
new MCPInstrumentation().manuallyInstrument({ clientStreamableHTTPModule: streamable });
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');

run(async () => {
  await trace.getTracer('agent').startActiveSpan('invoke_agent mcp', async (span) => {
    const client = new Client({ name: 'otel-test', version: '1' });
    await client.connect(new streamable.StreamableHTTPClientTransport(new URL(process.env.MCP_URL)));
    const r = await client.callTool({ name: process.env.MCP_TOOL, arguments: JSON.parse(process.env.MCP_ARGS) });
    const sc = span.spanContext();
    console.log(JSON.stringify({ trace: sc.traceId, span: sc.spanId, isError: r.isError === true }));
    await client.close();
    span.end();
  });
  await flush();
});

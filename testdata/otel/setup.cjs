'use strict';
// The OpenTelemetry JS SDK, as an application sets it up: a tracer and a
// logger provider exporting OTLP/HTTP protobuf to OTLP_ENDPOINT (the
// receiver under test), spans and log records exported as they end.
const { context, propagation, trace, logs } = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { TracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace');
const { LoggerProvider, SimpleLogRecordProcessor } = require('@opentelemetry/sdk-logs');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { OTLPLogExporter } = require('@opentelemetry/exporter-logs-otlp-proto');

const endpoint = process.env.OTLP_ENDPOINT;
if (!endpoint) throw new Error('OTLP_ENDPOINT is not set');
context.setGlobalContextManager(new AsyncLocalStorageContextManager());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const tracerProvider = new TracerProvider({
  spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: endpoint + '/v1/traces' }) })],
});
trace.setGlobalTracerProvider(tracerProvider);
const loggerProvider = new LoggerProvider({
  processors: [new SimpleLogRecordProcessor({ exporter: new OTLPLogExporter({ url: endpoint + '/v1/logs' }) })],
});
logs.setGlobalLoggerProvider(loggerProvider);

// flush exports what is left and fails the program when an export failed.
async function flush() {
  await tracerProvider.forceFlush();
  await loggerProvider.forceFlush();
  await tracerProvider.shutdown();
  await loggerProvider.shutdown();
}

// The tools an agent declares: what the test's listings say too.
const weather = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
};

// chat asks the upstream, with the OpenAI client given (instrumented by
// the caller), for the weather with get_weather declared; it prints the
// ids of the tool calls it got and flushes the exports.
async function chat(OpenAI) {
  const client = new OpenAI({ baseURL: process.env.UPSTREAM + '/v1', apiKey: 'sk-test', maxRetries: 0 });
  const r = await client.chat.completions.create({
    model: process.env.MODEL || 'gpt-4o',
    messages: [{ role: 'user', content: 'What is the weather in Oslo?' }],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather } }],
  });
  console.log(JSON.stringify(r.choices[0].message.tool_calls.map((c) => c.id)));
  await flush();
}

function run(main) {
  main().catch((e) => { console.error(e); process.exit(1); });
}

module.exports = { flush, chat, run, weather, upstream: process.env.UPSTREAM };

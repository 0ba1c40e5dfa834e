// The Vercel AI SDK's tool loop traced by @ai-sdk/otel (GenAI conventions
// in full): chat spans with gen_ai.tool.definitions and
// gen_ai.output.messages, execute_tool spans for the calls its schema let
// through, which the SDK executes.
import { createRequire } from 'node:module';
import { generateText, jsonSchema, registerTelemetry, tool } from 'ai';
import { OpenTelemetry } from '@ai-sdk/otel';
import { createOpenAI } from '@ai-sdk/openai';

const require = createRequire(import.meta.url);
const { flush, weather, upstream } = require('./setup.cjs');
registerTelemetry(new OpenTelemetry());

const executed = [];
const openai = createOpenAI({ baseURL: upstream + '/v1', apiKey: 'sk-test' });
const r = await generateText({
  model: openai.chat(process.env.MODEL || 'gpt-4o'),
  prompt: 'What is the weather in Oslo?',
  tools: {
    get_weather: tool({
      description: 'Weather of a city',
      inputSchema: jsonSchema(weather),
      execute: async (args) => { executed.push(args); return 'sunny'; },
    }),
  },
  maxRetries: 0,
});
console.log(JSON.stringify({ executed, calls: r.toolCalls.map((c) => c.toolCallId) }));
await flush();

// The Vercel AI SDK's own tool loop (generateText with tools and a step
// limit), pointed at resolverd proxy (BASE_URL): it executes every tool
// call it receives, and prints what it executed. The tools (TOOLS: name,
// description, parameters) are the test's. For modelproxy's
// TestVercelToolLoop; no telemetry.
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

const executed = [];
const tools = Object.fromEntries(JSON.parse(process.env.TOOLS).map((d) => [d.name, tool({
  description: d.description,
  inputSchema: jsonSchema(d.parameters),
  execute: async (args) => { executed.push({ name: d.name, args }); return 'done'; },
})]));
const openai = createOpenAI({ baseURL: process.env.BASE_URL, apiKey: 'sk-secret-vercel' });
const r = await generateText({
  model: openai.chat('gpt-5.1'),
  prompt: 'Weather in Paris?',
  tools,
  stopWhen: stepCountIs(4),
  maxRetries: 0,
});
console.log(JSON.stringify({ executed, text: r.text, steps: r.steps.length }));

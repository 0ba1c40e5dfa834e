// The model proxy's end-to-end client: the official SDKs, unmodified,
// pointed at resolverd proxy (their base URL). Reads scenarios as JSON
// lines on stdin and writes one JSON line on stdout for each:
//
//   {"api":"openai"|"anthropic", "op":"create"|"agent", "baseURL":..., "apiKey":...,
//    "request":{...the SDK's create parameters...}}
//
// create: the SDK's create() (openai: chat.completions, or responses
//   when "endpoint" is "responses"); out: {ok, response, headers,
//   output_text (Responses: the SDK's convenience getter)} or
//   {ok:false, status, error, name} (the SDK's thrown error).
// stream: the SDK's streaming helper (openai: chat.completions.stream,
//   or responses.stream when "endpoint" is "responses"; anthropic:
//   messages.stream), which accumulates the events into the final
//   message; out: {ok, response (that message), events (count)}.
// agent: the SDK's own agent loop, which executes every tool call it
//   receives (openai: chat.completions.runTools; anthropic:
//   beta.messages.toolRunner), streaming when "stream" is true; out:
//   {ok, executed:[{name,args}], final}.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

import { createInterface } from 'node:readline';

let sc, client;
const headerNames = ['toolaudit-calls', 'toolaudit-rejected', 'toolaudit-withheld', 'toolaudit-registry-version', 'toolaudit-retries', 'x-upstream'];

function out(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

async function create() {
  const p = sc.api === 'anthropic' ? client.messages.create(sc.request)
    : sc.endpoint === 'responses' ? client.responses.create(sc.request)
    : client.chat.completions.create(sc.request);
  const { data, response } = await p.withResponse();
  const headers = {};
  for (const h of headerNames) {
    const v = response.headers.get(h);
    if (v !== null) headers[h] = v;
  }
  out({ ok: true, response: data, headers, output_text: data.output_text ?? null });
}

async function stream() {
  if (sc.endpoint === 'responses') {
    const s = client.responses.stream(sc.request);
    let events = 0;
    s.on('event', () => { events++; });
    const response = await s.finalResponse();
    out({ ok: true, response, events, output_text: response.output_text ?? null });
    return;
  }
  const s = sc.api === 'openai'
    ? client.chat.completions.stream(sc.request)
    : client.messages.stream(sc.request);
  let events = 0;
  s.on(sc.api === 'openai' ? 'chunk' : 'streamEvent', () => { events++; });
  const response = sc.api === 'openai' ? await s.finalChatCompletion() : await s.finalMessage();
  out({ ok: true, response, events });
}

async function agent() {
  const executed = [];
  const run = (name) => async (args) => {
    executed.push({ name, args });
    return `${name} done`;
  };
  if (sc.api === 'openai') {
    const tools = sc.request.tools.map((t) => ({
      type: 'function',
      function: { ...t.function, function: run(t.function.name), parse: JSON.parse },
    }));
    const runner = client.chat.completions.runTools({ ...sc.request, tools, stream: !!sc.stream }, { maxChatCompletions: 4 });
    const final = await runner.finalChatCompletion();
    out({ ok: true, executed, final: final.choices[0].message });
    return;
  }
  const tools = sc.request.tools.map((t) => ({ ...t, run: run(t.name), parse: (x) => x }));
  const runner = client.beta.messages.toolRunner({ ...sc.request, tools, thread: false, max_iterations: 4, stream: !!sc.stream });
  const final = await runner.runUntilDone();
  out({ ok: true, executed, final });
}

// One scenario per line, one answer line each, in order: one node
// process serves a whole test run (starting node and loading the SDKs
// costs about a third of a CPU second).
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  sc = JSON.parse(line);
  const opts = { baseURL: sc.baseURL, apiKey: sc.apiKey, maxRetries: 0, timeout: 30000 };
  client = sc.api === 'openai' ? new OpenAI(opts) : new Anthropic(opts);
  try {
    await ({ agent, stream, create }[sc.op])();
  } catch (e) {
    out({ ok: false, status: e.status ?? 0, error: e.error ?? null, name: e.constructor?.name ?? '', message: String(e.message ?? e) });
  }
}

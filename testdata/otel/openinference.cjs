'use strict';
// openai 6 traced by OpenInference (@arizeai/openinference-instrumentation-openai):
// the tools declared are llm.tools.*, the tool calls returned
// llm.output_messages.*.message.tool_calls.* on the LLM span.
const { chat, run } = require('./setup.cjs');
const { OpenAIInstrumentation } = require('@arizeai/openinference-instrumentation-openai');
const OpenAI = require('openai');
new OpenAIInstrumentation().manuallyInstrument(OpenAI);

run(() => chat(OpenAI));

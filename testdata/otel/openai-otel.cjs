'use strict';
// openai 6 traced by the OpenTelemetry project's own instrumentation
// (@opentelemetry/instrumentation-openai): the tool calls the model
// returned are gen_ai.choice log records; arguments only with
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (the test runs
// it both ways). It records no tool definitions.
const { chat, run } = require('./setup.cjs');
const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { OpenAIInstrumentation } = require('@opentelemetry/instrumentation-openai');
registerInstrumentations({ instrumentations: [new OpenAIInstrumentation()] });

run(() => chat(require('openai')));

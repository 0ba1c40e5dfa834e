-- decisions: the OpenTelemetry trace and span a call was recorded in
-- (lowercase hex, 32 and 16 digits; '' when its source has none, and on
-- every row written before this migration), so that an incident leads
-- from a decision to the agent run's trace. The calls of the
-- OpenTelemetry topics and of ingest --format otel carry them; a call
-- event may (trace_id, span_id: an addition to the contract). Additive.
ALTER TABLE {db}.decisions
    ADD COLUMN IF NOT EXISTS trace_id String DEFAULT '' CODEC(ZSTD(1)) AFTER offset,
    ADD COLUMN IF NOT EXISTS span_id String DEFAULT '' CODEC(ZSTD(1)) AFTER trace_id;

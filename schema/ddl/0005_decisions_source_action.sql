-- decisions: who decided (source), what the enforcement point did (action),
-- and the nearest valid name of an unknown tool (suggested_tool); wire
-- contract v1.1.
--
-- source is stream (the calls topic), api (POST /v1/resolve), gateway (the
-- MCP gateway) or reanalysis. One event can be decided in the call path and
-- again when it arrives through the calls topic: both rows are kept, so the
-- sorting key, which is the deduplication key of ReplacingMergeTree, gains
-- source. ClickHouse lets an ALTER append to the sorting key only a column
-- that the same ALTER adds, and only one without a default expression; the
-- second statement then gives source its default, 'stream', which is also
-- what the parts written before this migration (all decided from the
-- stream) read, since they lack the column. The primary index stays
-- (analysis_id, call_key): lookups by call are as fast as before.
--
-- action is what the host reports it did with the verdict: enforced,
-- observed, or '' (unknown); the verdict is the resolver's.
--
-- suggested_tool: for H1 and M1, the valid name of the registry version
-- nearest to the emitted one (qualified server__tool where a pin is
-- needed), '' otherwise; it tells a near miss from an invention.
ALTER TABLE {db}.decisions
    ADD COLUMN IF NOT EXISTS source LowCardinality(String) AFTER policy_version,
    MODIFY ORDER BY (analysis_id, call_key, source);

ALTER TABLE {db}.decisions
    MODIFY COLUMN source LowCardinality(String) DEFAULT 'stream',
    ADD COLUMN IF NOT EXISTS action LowCardinality(String) DEFAULT '' AFTER source,
    ADD COLUMN IF NOT EXISTS suggested_tool LowCardinality(String) DEFAULT '' AFTER action;

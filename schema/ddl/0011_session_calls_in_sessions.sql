-- A session's call keys kept in sessions_by_hour (call_keys) instead of
-- table session_calls (issue 25). session_calls held one row per call,
-- sorted by session: every INSERT into decisions sorted and wrote its rows
-- a second time, and merged them again later, which cost the engine more
-- than any other view (0.47 - 0.49 us of CPU per row at insert and 0.47 -
-- 0.48 in its merges; PROFILE=1 scripts/bench-engine.sh 500000, three
-- rounds). With the keys here, sessions_by_hour's view costs 0.39 - 0.43
-- instead of 0.27 - 0.30 and its merges 0.18 - 0.22 instead of 0.04 -
-- 0.05: the INSERTs with their views 2.69 - 2.93 us per row instead of
-- 3.13 - 3.24, and 3.6 - 3.8 with the views' merges instead of 4.0 - 4.3.
-- sessions_by_hour already groups every
-- INSERT's rows by session and hour: there the call keys are one array per
-- session and hour, concatenated when parts merge (groupArrayArray), about
-- as many bytes as session_calls' call_key column but no sort and no part
-- of their own.
--
-- The incident drill-down finds a session's decisions by primary key from
-- the call keys of the range's hours (package analytics,
-- incident.session_decisions), then reads decisions FINAL with the exact
-- time filter. A redelivered call's key appears twice in the array: the
-- lookup is a set. Rows of sessions_by_hour written before this migration
-- have no call keys; their calls are in session_calls, which the drill-down
-- still reads and which is no longer fed: it empties as its rows reach the
-- 400 days of its TTL.
DROP VIEW IF EXISTS {db}.session_calls_mv;

ALTER TABLE {db}.sessions_by_hour
    ADD COLUMN IF NOT EXISTS call_keys SimpleAggregateFunction(groupArrayArray, Array(String)) CODEC(ZSTD(1));

DROP VIEW IF EXISTS {db}.sessions_by_hour_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.sessions_by_hour_mv
TO {db}.sessions_by_hour
AS SELECT
    toStartOfHour(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS hour,
    analysis_id, registry, agent_id, model, session_id,
    count() AS rows,
    countIf(verdict = 'reject') AS rejects,
    min(emitted_at) AS first_emitted,
    max(emitted_at) AS last_emitted,
    groupUniqArray(class) AS classes,
    groupArray(call_key) AS call_keys
FROM {db}.decisions
WHERE session_id != ''
GROUP BY hour, analysis_id, registry, agent_id, model, session_id;

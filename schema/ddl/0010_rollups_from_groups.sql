-- The rollups fed from one grouping of each inserted block instead of
-- six (issue 25). Each of decisions_by_minute, the two rollup tiers,
-- decisions_by_tool_day, fabricated_names_day and registry_versions_seen
-- had its own materialized view over the rows of every INSERT into
-- decisions: six GROUP BYs of every row. Now one view groups the rows once,
-- by the union of their keys (the bucket's minute, analysis, registry and
-- its version, model, provider, surface, source, class, verdict, the tool
-- as called and as resolved, the pin, the suggested name), into
-- decisions_groups, a Null table (it stores nothing: it only feeds the
-- views on it), and the six rollups are fed from those groups, which are
-- far fewer than the rows: a batch of 100,000 corpus calls has at most
-- 3,399, the corpus's distinct calls.
-- The counts are sums of the groups' counts, the distinct calls of
-- decisions_by_minute a merge of the groups' uniq states, the first and last
-- emission times the min and max of the groups': each rollup holds exactly
-- what its own view wrote before. Measured (PROFILE=1
-- scripts/bench-engine.sh 500000, 100,000-row INSERTs, two alternated
-- rounds; docs/performance.md §3): the six views cost the engine 1.31 -
-- 1.55 us of CPU per row of decisions, the grouping and the six views on
-- its groups 0.94 - 0.99 us.
--
-- The worst case, every row a group of its own, costs one grouping more
-- than before. Redelivery and retries count as before (see 0007): the
-- views on decisions_groups receive the blocks of the same INSERT, and an
-- exact retry of a batch is dropped by each rollup's own deduplication
-- window, whose block hashes follow the writer's deduplication token.
--
-- The time bucket is computed once: the minute of emitted_at, or of
-- decided_at for a row without a usable emission time (see 0002); an hour
-- and a day are those of the minute. registry_versions_seen takes only rows
-- with a registry version and an emission time, as its view did: timed,
-- first_emitted and last_emitted count and bound those rows alone.
--
-- The old views are dropped first, then the new chain is made from the
-- rollups up: an INSERT between the two statements is not counted in the
-- rollups (decisions holds it). Migrate with the writers stopped for exact
-- rollups.
DROP VIEW IF EXISTS {db}.decisions_by_minute_mv;
DROP VIEW IF EXISTS {db}.decisions_rollup_minute_mv;
DROP VIEW IF EXISTS {db}.decisions_rollup_hour_mv;
DROP VIEW IF EXISTS {db}.decisions_by_tool_day_mv;
DROP VIEW IF EXISTS {db}.fabricated_names_day_mv;
DROP VIEW IF EXISTS {db}.registry_versions_seen_mv;

CREATE TABLE IF NOT EXISTS {db}.decisions_groups
(
    minute           DateTime('UTC'),
    analysis_id      LowCardinality(String),
    registry         LowCardinality(String),
    registry_version LowCardinality(String),
    model            LowCardinality(String),
    provider         LowCardinality(String),
    surface          LowCardinality(String),
    source           LowCardinality(String),
    class            LowCardinality(String),
    verdict          LowCardinality(String),
    resolved_server  LowCardinality(String),
    resolved_tool    LowCardinality(String),
    server           LowCardinality(String),
    tool             LowCardinality(String),
    suggested_tool   LowCardinality(String),
    rows             UInt64,
    coercible        UInt64,
    drift            UInt64,
    suggested        UInt64,
    calls            AggregateFunction(uniq, String),
    timed            UInt64,
    first_emitted    DateTime64(3, 'UTC'),
    last_emitted     DateTime64(3, 'UTC')
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_by_minute_mv
TO {db}.decisions_by_minute
AS SELECT
    minute, analysis_id, registry, class, verdict, model, provider,
    sum(rows) AS rows,
    uniqMergeState(calls) AS calls,
    sum(drift) AS drift,
    sum(coercible) AS coercible
FROM {db}.decisions_groups
GROUP BY minute, analysis_id, registry, class, verdict, model, provider;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_rollup_minute_mv
TO {db}.decisions_rollup_minute
AS SELECT
    minute, analysis_id, registry, model, provider, surface, source, class, verdict,
    sum(rows) AS rows,
    sum(coercible) AS coercible,
    sum(drift) AS drift,
    sum(suggested) AS suggested
FROM {db}.decisions_groups
GROUP BY minute, analysis_id, registry, model, provider, surface, source, class, verdict;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_rollup_hour_mv
TO {db}.decisions_rollup_hour
AS SELECT
    toStartOfHour(minute) AS hour,
    analysis_id, registry, model, provider, surface, source, class, verdict,
    sum(rows) AS rows,
    sum(coercible) AS coercible,
    sum(drift) AS drift,
    sum(suggested) AS suggested
FROM {db}.decisions_groups
GROUP BY hour, analysis_id, registry, model, provider, surface, source, class, verdict;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_by_tool_day_mv
TO {db}.decisions_by_tool_day
AS SELECT
    toDate(minute, 'UTC') AS day,
    analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class,
    sum(rows) AS rows,
    sum(drift) AS drift
FROM {db}.decisions_groups
GROUP BY day, analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.fabricated_names_day_mv
TO {db}.fabricated_names_day
AS SELECT
    toDate(minute, 'UTC') AS day,
    analysis_id, registry, source, model, surface, class, tool, suggested_tool,
    sum(rows) AS rows
FROM {db}.decisions_groups
WHERE class IN ('H1', 'M1')
GROUP BY day, analysis_id, registry, source, model, surface, class, tool, suggested_tool;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.registry_versions_seen_mv
TO {db}.registry_versions_seen
AS SELECT
    analysis_id, registry, registry_version,
    min(first_emitted) AS first_emitted,
    max(last_emitted) AS last_emitted,
    sum(timed) AS rows
FROM {db}.decisions_groups
WHERE registry_version != '' AND timed > 0
GROUP BY analysis_id, registry, registry_version;

-- Last: from here on every INSERT into decisions feeds the chain.
CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_groups_mv
TO {db}.decisions_groups
AS SELECT
    toStartOfMinute(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS minute,
    analysis_id, registry, registry_version, model, provider, surface, source, class, verdict,
    resolved_server, resolved_tool, server, tool, suggested_tool,
    count() AS rows,
    countIf(coercible) AS coercible,
    countIf(drift) AS drift,
    countIf(suggested_tool != '') AS suggested,
    uniqState(call_key) AS calls,
    countIf(emitted_at > toDateTime64(0, 3, 'UTC')) AS timed,
    minIf(emitted_at, emitted_at > toDateTime64(0, 3, 'UTC')) AS first_emitted,
    maxIf(emitted_at, emitted_at > toDateTime64(0, 3, 'UTC')) AS last_emitted
FROM {db}.decisions
GROUP BY minute, analysis_id, registry, registry_version, model, provider, surface, source, class, verdict,
    resolved_server, resolved_tool, server, tool, suggested_tool;

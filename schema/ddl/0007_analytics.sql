-- Analytics: the rollups the dashboards and `resolverd report` read, each
-- fed by a materialized view on every INSERT into decisions, so that no
-- panel reads the raw table over a time range. decisions is sorted by
-- (analysis_id, call_key, source): a time range of it is a scan of whole
-- months (its minmax index on emitted_at cannot skip granules of random call
-- keys), which at 100M rows takes seconds. Package analytics holds the
-- queries and states, for each, what it reads and how exact it is.
--
-- What the rollups count. A materialized view sees inserted blocks, not
-- the table after FINAL, so every rollup counts decision rows as
-- delivered: the same as decisions FINAL except after a crash or a
-- partition move, when the calls of batches written but not committed are
-- decided again and counted twice (at most the writer's two batches in
-- flight per move; see stream/doc.go). An exact retry of a batch is
-- dropped by the insert deduplication of decisions and of each rollup
-- (non_replicated_deduplication_window on both). rows counts decisions, so
-- a call decided by the API and again by the stream counts once per
-- source: panels filter on source.
--
-- Time. Buckets are of emitted_at, the call's own time (the time
-- dashboards select); a row without a usable one (MALFORMED, stored as
-- 1970) or one outside DateTime's range is bucketed at its decision time,
-- as in decisions_by_minute.
--
-- Two tiers of the same counts: per minute (incident ranges: up to two
-- days) and per hour (weeks and months). A minute of a large fleet
-- holds about as many distinct (registry, model, provider, surface,
-- class) combinations as decisions, so the minute tier is not much smaller
-- than the raw table and only short ranges read it; an hour folds 60 of
-- them. SummingMergeTree adds up the counts of rows with the same key
-- when parts merge; readers sum() them, merged or not.
CREATE TABLE IF NOT EXISTS {db}.decisions_rollup_minute
(
    minute      DateTime('UTC')        CODEC(Delta, ZSTD(1)),
    analysis_id LowCardinality(String),
    registry    LowCardinality(String),
    model       LowCardinality(String),
    provider    LowCardinality(String),
    surface     LowCardinality(String),
    source      LowCardinality(String),
    class       LowCardinality(String),
    verdict     LowCardinality(String),
    -- decisions, decisions with a coercible value (H3 "5" for 5), whose
    -- tool changed after the call (drift), and H1/M1 decisions with a
    -- suggested nearest name (near misses rather than inventions)
    rows        UInt64,
    coercible   UInt64,
    drift       UInt64,
    suggested   UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (analysis_id, minute, registry, model, provider, surface, source, class, verdict)
TTL minute + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_rollup_minute_mv
TO {db}.decisions_rollup_minute
AS SELECT
    toStartOfMinute(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS minute,
    analysis_id, registry, model, provider, surface, source, class, verdict,
    count() AS rows,
    countIf(coercible) AS coercible,
    countIf(drift) AS drift,
    countIf(suggested_tool != '') AS suggested
FROM {db}.decisions
GROUP BY minute, analysis_id, registry, model, provider, surface, source, class, verdict;

CREATE TABLE IF NOT EXISTS {db}.decisions_rollup_hour
(
    hour        DateTime('UTC')        CODEC(Delta, ZSTD(1)),
    analysis_id LowCardinality(String),
    registry    LowCardinality(String),
    model       LowCardinality(String),
    provider    LowCardinality(String),
    surface     LowCardinality(String),
    source      LowCardinality(String),
    class       LowCardinality(String),
    verdict     LowCardinality(String),
    rows        UInt64,
    coercible   UInt64,
    drift       UInt64,
    suggested   UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (analysis_id, hour, registry, model, provider, surface, source, class, verdict)
TTL hour + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_rollup_hour_mv
TO {db}.decisions_rollup_hour
AS SELECT
    toStartOfHour(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS hour,
    analysis_id, registry, model, provider, surface, source, class, verdict,
    count() AS rows,
    countIf(coercible) AS coercible,
    countIf(drift) AS drift,
    countIf(suggested_tool != '') AS suggested
FROM {db}.decisions
GROUP BY hour, analysis_id, registry, model, provider, surface, source, class, verdict;

-- Per day and tool: the MCP servers dashboard (M1-M5, drift and stale
-- definitions by server and tool). resolved_server and resolved_tool are
-- empty when the name did not resolve (H1, M1, M2, M3, MALFORMED); tool is
-- the name as emitted (a flattened server__tool, a near miss) and server
-- the caller's pin. The fleet review reads weeks: a day is its grain.
CREATE TABLE IF NOT EXISTS {db}.decisions_by_tool_day
(
    day             Date                   CODEC(Delta, ZSTD(1)),
    analysis_id     LowCardinality(String),
    registry        LowCardinality(String),
    source          LowCardinality(String),
    resolved_server LowCardinality(String),
    resolved_tool   LowCardinality(String),
    server          LowCardinality(String),
    tool            LowCardinality(String),
    class           LowCardinality(String),
    rows            UInt64,
    drift           UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (analysis_id, day, registry, source, resolved_server, resolved_tool, server, tool, class)
TTL day + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_by_tool_day_mv
TO {db}.decisions_by_tool_day
AS SELECT
    toDate(if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
              emitted_at, decided_at), 'UTC') AS day,
    analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class,
    count() AS rows,
    countIf(drift) AS drift
FROM {db}.decisions
GROUP BY day, analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class;

-- Fabricated names: H1 and M1 calls per day with the nearest valid name
-- of the registry version (suggested_tool, '' when none is near), by model
-- and surface: which models invent tools, and whether a name is a near miss
-- (case, plural, a functions. or mcp__ prefix, a typo) or an invention.
CREATE TABLE IF NOT EXISTS {db}.fabricated_names_day
(
    day            Date                   CODEC(Delta, ZSTD(1)),
    analysis_id    LowCardinality(String),
    registry       LowCardinality(String),
    source         LowCardinality(String),
    model          LowCardinality(String),
    surface        LowCardinality(String),
    class          LowCardinality(String),
    tool           String                 CODEC(ZSTD(3)),
    suggested_tool LowCardinality(String),
    rows           UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(day)
ORDER BY (analysis_id, day, registry, source, model, surface, class, tool, suggested_tool)
TTL day + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.fabricated_names_day_mv
TO {db}.fabricated_names_day
AS SELECT
    toDate(if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
              emitted_at, decided_at), 'UTC') AS day,
    analysis_id, registry, source, model, surface, class, tool, suggested_tool,
    count() AS rows
FROM {db}.decisions
WHERE class IN ('H1', 'M1')
GROUP BY day, analysis_id, registry, source, model, surface, class, tool, suggested_tool;

-- Registry versions seen in decisions: when each version was first and
-- last current for a decided call. The version in force at a time is the
-- one seen last before it.
CREATE TABLE IF NOT EXISTS {db}.registry_versions_seen
(
    analysis_id      LowCardinality(String),
    registry         LowCardinality(String),
    registry_version LowCardinality(String),
    first_emitted    SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_emitted     SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    rows             SimpleAggregateFunction(sum, UInt64)
)
ENGINE = AggregatingMergeTree
ORDER BY (analysis_id, registry, registry_version)
SETTINGS non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.registry_versions_seen_mv
TO {db}.registry_versions_seen
AS SELECT
    analysis_id, registry, registry_version,
    min(emitted_at) AS first_emitted,
    max(emitted_at) AS last_emitted,
    count() AS rows
FROM {db}.decisions
WHERE registry_version != '' AND emitted_at > toDateTime64(0, 3, 'UTC')
GROUP BY analysis_id, registry, registry_version;

-- Sessions per hour: the incident drill-down's list of sessions to open
-- (who was rejected, when), and its agent variable. A session spans hours,
-- so readers sum over them. AggregatingMergeTree with simple aggregates:
-- the counts add up, the times keep their min and max, the classes their
-- union when parts merge.
CREATE TABLE IF NOT EXISTS {db}.sessions_by_hour
(
    hour          DateTime('UTC')        CODEC(Delta, ZSTD(1)),
    analysis_id   LowCardinality(String),
    registry      LowCardinality(String),
    agent_id      LowCardinality(String),
    model         LowCardinality(String),
    session_id    String                 CODEC(ZSTD(1)),
    rows          SimpleAggregateFunction(sum, UInt64),
    rejects       SimpleAggregateFunction(sum, UInt64),
    first_emitted SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_emitted  SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    classes       SimpleAggregateFunction(groupUniqArrayArray, Array(String))
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (analysis_id, hour, registry, agent_id, model, session_id)
TTL hour + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

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
    groupUniqArray(class) AS classes
FROM {db}.decisions
WHERE session_id != ''
GROUP BY hour, analysis_id, registry, agent_id, model, session_id;

-- Decisions taken in the call path (source api or gateway), by time: the
-- time-of-check/time-of-use view compares each with the stream's decision
-- of the same call, which it finds by the primary key of decisions
-- (analysis_id, call_key). Scanning decisions for the few call-path rows of
-- a time range would read whole months.
CREATE TABLE IF NOT EXISTS {db}.call_path_decisions
(
    analysis_id LowCardinality(String),
    emitted_at  DateTime64(3, 'UTC')   CODEC(T64, ZSTD(1)),
    call_key    String                 CODEC(ZSTD(1)),
    source      LowCardinality(String),
    registry    LowCardinality(String),
    agent_id    LowCardinality(String),
    session_id  String                 CODEC(ZSTD(1)),
    model       LowCardinality(String),
    class       LowCardinality(String),
    decided_at  DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(decided_at)
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (analysis_id, emitted_at, call_key, source)
TTL greatest(emitted_at, decided_at) + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.call_path_decisions_mv
TO {db}.call_path_decisions
AS SELECT analysis_id, emitted_at, call_key, source, registry, agent_id, session_id, model, class, decided_at
FROM {db}.decisions
WHERE source IN ('api', 'gateway');

-- A session's calls by time: the incident drill-down finds a session's
-- decisions by the primary key of decisions (analysis_id, call_key) from
-- here. The session_id bloom index of decisions reads granules in
-- proportion to the table (its false positives: 0.8M rows read for a
-- session's 20 at 10M decisions); this lookup reads the session's own.
CREATE TABLE IF NOT EXISTS {db}.session_calls
(
    analysis_id LowCardinality(String),
    session_id  String                 CODEC(ZSTD(1)),
    emitted_at  DateTime64(3, 'UTC')   CODEC(T64, ZSTD(1)),
    call_key    String                 CODEC(ZSTD(1)),
    decided_at  DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(decided_at)
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (analysis_id, session_id, emitted_at, call_key)
TTL greatest(emitted_at, decided_at) + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.session_calls_mv
TO {db}.session_calls
AS SELECT analysis_id, session_id, emitted_at, call_key, decided_at
FROM {db}.decisions
WHERE session_id != '';

-- registry_changes: the registry history, one row per change of one tool
-- of one server at one listing's observed_at, with a structured diff of
-- its definition (package registrydiff), written by resolverd as it
-- applies listings (package registryhistory). change is added, removed,
-- changed (the digest: name and inputSchema) or trust (the server's trust
-- tier alone). The diff columns hold JSON pointers into the arguments
-- (/filter/state, /items/*/id for array items) with, for retyped, the
-- old and new types ("/limit: string -> integer"), for enum values the
-- value ("/state: \"closed\""), and other keyword changes in other.
--
-- A listing can arrive after a later one (event time): the change at the
-- next listing of that server is then recomputed and written again, and a
-- tool that no longer changed there is written with deleted = 1.
-- ReplacingMergeTree(recorded_at, deleted) keeps, per key, the last row
-- written, and FINAL drops the deleted ones. Every instance writes the same
-- rows (each reads all listings) and a restart writes them all again: they
-- collapse on the key.
CREATE TABLE IF NOT EXISTS {db}.registry_changes
(
    registry         LowCardinality(String),
    server           LowCardinality(String),
    tool             String                 CODEC(ZSTD(3)),
    observed_at      DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1)),
    event_id         String                 CODEC(ZSTD(1)),
    change           LowCardinality(String),
    trust_before     Int32,
    trust_after      Int32,
    digest_before    String                 CODEC(ZSTD(1)),
    digest_after     String                 CODEC(ZSTD(1)),
    props_added      Array(String)          CODEC(ZSTD(3)),
    props_removed    Array(String)          CODEC(ZSTD(3)),
    props_retyped    Array(String)          CODEC(ZSTD(3)),
    required_added   Array(String)          CODEC(ZSTD(3)),
    required_removed Array(String)          CODEC(ZSTD(3)),
    enum_added       Array(String)          CODEC(ZSTD(3)),
    enum_removed     Array(String)          CODEC(ZSTD(3)),
    other            Array(String)          CODEC(ZSTD(3)),
    summary          String                 CODEC(ZSTD(3)),
    recorded_at      DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1)),
    deleted          UInt8
)
ENGINE = ReplacingMergeTree(recorded_at, deleted)
ORDER BY (registry, server, tool, observed_at);

CREATE DATABASE IF NOT EXISTS `toolaudit` ON CLUSTER `prod`;

CREATE TABLE IF NOT EXISTS `toolaudit`.schema_migrations ON CLUSTER `prod`
(
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime64(3, 'UTC')
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', applied_at)
ORDER BY version;

-- 0001_decisions.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.decisions_local ON CLUSTER `prod`
(
    -- the decision (spec v1, "Decision")
    event_id         String                 CODEC(ZSTD(1)),
    verdict          LowCardinality(String),
    class            LowCardinality(String),
    reason           String                 CODEC(ZSTD(3)),
    path             String                 CODEC(ZSTD(3)),
    coercible        Bool,
    resolved_server  LowCardinality(String),
    resolved_tool    LowCardinality(String),
    registry_version LowCardinality(String),
    drift            Bool,
    seen_digest      String                 CODEC(ZSTD(1)),
    current_digest   String                 CODEC(ZSTD(1)),

    -- identity and the versions that produced the decision
    call_key         String                 CODEC(ZSTD(1)),
    analysis_id      LowCardinality(String),
    resolver_build   LowCardinality(String),
    policy_version   LowCardinality(String),

    -- the call's context
    registry         LowCardinality(String),
    agent_id         LowCardinality(String),
    session_id       String                 CODEC(ZSTD(1)),
    model            LowCardinality(String),
    provider         LowCardinality(String),
    surface          LowCardinality(String),
    tool             LowCardinality(String),
    server           LowCardinality(String),
    emitted_at       DateTime64(3, 'UTC')   CODEC(T64, ZSTD(1)),
    decided_at       DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1)),

    -- arguments: untrusted, may hold secrets; args_raw is empty unless the
    -- pipeline is configured to keep raw arguments
    args_shape       String                 CODEC(ZSTD(3)),
    args_hash        String                 CODEC(ZSTD(1)),
    args_raw         String                 CODEC(ZSTD(3)),

    -- the Kafka record the call came from ("" / 0 for files)
    topic            LowCardinality(String),
    partition        Int32                  CODEC(T64, ZSTD(1)),
    offset           Int64                  CODEC(T64, ZSTD(1)),

    -- Dashboards filter on time, which is not in the sort key: a minmax
    -- index skips granules outside the range within a month's partition.
    INDEX emitted_at_minmax emitted_at TYPE minmax GRANULARITY 1,
    -- Drill-down by session ("what did this agent session do?").
    INDEX session_id_bloom session_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', decided_at)
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (analysis_id, call_key)
-- Retention: 400 days (13 months and change) keeps a full year for
-- year-over-year comparison of hallucination rates plus a month of slack for
-- audits, and bounds the store (args_raw can be large). It counts from the
-- later of emitted_at and decided_at, not from emitted_at alone, so that no
-- row is expired the moment it is written: a MALFORMED row without a time
-- (emitted_at 1970) or a re-analysis of history older than 400 days lives
-- 400 days from its decision (the writer stores a zero decided_at as the
-- time of writing). The arithmetic stays in DateTime64: toDateTime() would
-- wrap times after 2106 into the past and expire them.
TTL greatest(emitted_at, decided_at) + INTERVAL 400 DAY
SETTINGS
    -- Expire whole parts only (no TTL rewrites of live parts): parts are
    -- per month, so a month goes when its last row is due.
    ttl_only_drop_parts = 1,
    -- A retried INSERT of the very same batch (the writer timed out but the
    -- server had committed it) is dropped at insert time (the same setting
    -- on decisions_by_minute keeps the rollup from counting it again);
    -- re-decided rows (a new decided_at) are not identical and are
    -- collapsed by ReplacingMergeTree instead.
    non_replicated_deduplication_window = 1000;

-- 0002_decisions_by_minute.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.decisions_by_minute_local ON CLUSTER `prod`
(
    minute      DateTime('UTC')        CODEC(Delta, ZSTD(1)),
    analysis_id LowCardinality(String),
    registry    LowCardinality(String),
    class       LowCardinality(String),
    verdict     LowCardinality(String),
    model       LowCardinality(String),
    provider    LowCardinality(String),
    rows        SimpleAggregateFunction(sum, UInt64),
    calls       AggregateFunction(uniq, String),
    drift       SimpleAggregateFunction(sum, UInt64),
    coercible   SimpleAggregateFunction(sum, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(minute)
ORDER BY (analysis_id, registry, minute, class, verdict, model, provider)
-- Same retention as decisions; minute is a real time here (see the MV).
TTL minute + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    -- The MV's blocks are deduplicated in this table, not in decisions: an
    -- exact retry of a batch that decisions drops would otherwise still be
    -- counted here (measured on ClickHouse 26.7).
    non_replicated_deduplication_window = 1000;

-- 0002_decisions_by_minute.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_by_minute_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_by_minute_local
AS SELECT
    -- A row without a usable emitted_at (stored as 1970), or with one
    -- outside DateTime's 1970..2106, is bucketed at its decision time, so
    -- that MALFORMED spikes show when they happen.
    toStartOfMinute(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS minute,
    analysis_id,
    registry,
    class,
    verdict,
    model,
    provider,
    count() AS rows,
    uniqState(call_key) AS calls,
    countIf(drift) AS drift,
    countIf(coercible) AS coercible
FROM `toolaudit`.decisions_local
GROUP BY minute, analysis_id, registry, class, verdict, model, provider;

-- 0003_decisions_compact_inserts.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod` MODIFY SETTING min_bytes_for_wide_part = 67108864;

-- 0004_decisions_digests_lowcardinality.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod`
    MODIFY COLUMN seen_digest LowCardinality(String) CODEC(ZSTD(1)),
    MODIFY COLUMN current_digest LowCardinality(String) CODEC(ZSTD(1));

-- 0005_decisions_source_action.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod`
    ADD COLUMN IF NOT EXISTS source LowCardinality(String) AFTER policy_version,
    MODIFY ORDER BY (analysis_id, call_key, source);

-- 0005_decisions_source_action.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod`
    MODIFY COLUMN source LowCardinality(String) DEFAULT 'stream',
    ADD COLUMN IF NOT EXISTS action LowCardinality(String) DEFAULT '' AFTER source,
    ADD COLUMN IF NOT EXISTS suggested_tool LowCardinality(String) DEFAULT '' AFTER action;

-- 0006_call_events.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.call_events_local ON CLUSTER `prod`
(
    emitted_at  DateTime64(3, 'UTC')   CODEC(T64, ZSTD(1)),
    topic       LowCardinality(String),
    partition   Int32                  CODEC(T64, ZSTD(1)),
    offset      Int64                  CODEC(T64, ZSTD(1)),
    timestamp   DateTime64(3, 'UTC')   CODEC(T64, ZSTD(1)),
    key         String                 CODEC(ZSTD(1)),
    value       String                 CODEC(ZSTD(3)),
    archived_at DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', archived_at)
PARTITION BY toYYYYMMDD(emitted_at)
ORDER BY (emitted_at, topic, partition, offset)
TTL greatest(emitted_at, archived_at) + INTERVAL 90 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.decisions_rollup_minute_local ON CLUSTER `prod`
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
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(minute)
ORDER BY (analysis_id, minute, registry, model, provider, surface, source, class, verdict)
TTL minute + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_rollup_minute_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_rollup_minute_local
AS SELECT
    toStartOfMinute(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS minute,
    analysis_id, registry, model, provider, surface, source, class, verdict,
    count() AS rows,
    countIf(coercible) AS coercible,
    countIf(drift) AS drift,
    countIf(suggested_tool != '') AS suggested
FROM `toolaudit`.decisions_local
GROUP BY minute, analysis_id, registry, model, provider, surface, source, class, verdict;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.decisions_rollup_hour_local ON CLUSTER `prod`
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
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(hour)
ORDER BY (analysis_id, hour, registry, model, provider, surface, source, class, verdict)
TTL hour + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_rollup_hour_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_rollup_hour_local
AS SELECT
    toStartOfHour(toDateTime(
        if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
           emitted_at, decided_at), 'UTC')) AS hour,
    analysis_id, registry, model, provider, surface, source, class, verdict,
    count() AS rows,
    countIf(coercible) AS coercible,
    countIf(drift) AS drift,
    countIf(suggested_tool != '') AS suggested
FROM `toolaudit`.decisions_local
GROUP BY hour, analysis_id, registry, model, provider, surface, source, class, verdict;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.decisions_by_tool_day_local ON CLUSTER `prod`
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
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(day)
ORDER BY (analysis_id, day, registry, source, resolved_server, resolved_tool, server, tool, class)
TTL day + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_by_tool_day_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_by_tool_day_local
AS SELECT
    toDate(if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
              emitted_at, decided_at), 'UTC') AS day,
    analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class,
    count() AS rows,
    countIf(drift) AS drift
FROM `toolaudit`.decisions_local
GROUP BY day, analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.fabricated_names_day_local ON CLUSTER `prod`
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
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(day)
ORDER BY (analysis_id, day, registry, source, model, surface, class, tool, suggested_tool)
TTL day + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.fabricated_names_day_mv ON CLUSTER `prod`
TO `toolaudit`.fabricated_names_day_local
AS SELECT
    toDate(if(emitted_at > toDateTime64(0, 3, 'UTC') AND emitted_at < toDateTime64('2106-01-01 00:00:00', 3, 'UTC'),
              emitted_at, decided_at), 'UTC') AS day,
    analysis_id, registry, source, model, surface, class, tool, suggested_tool,
    count() AS rows
FROM `toolaudit`.decisions_local
WHERE class IN ('H1', 'M1')
GROUP BY day, analysis_id, registry, source, model, surface, class, tool, suggested_tool;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.registry_versions_seen_local ON CLUSTER `prod`
(
    analysis_id      LowCardinality(String),
    registry         LowCardinality(String),
    registry_version LowCardinality(String),
    first_emitted    SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_emitted     SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    rows             SimpleAggregateFunction(sum, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
ORDER BY (analysis_id, registry, registry_version)
SETTINGS non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.registry_versions_seen_mv ON CLUSTER `prod`
TO `toolaudit`.registry_versions_seen_local
AS SELECT
    analysis_id, registry, registry_version,
    min(emitted_at) AS first_emitted,
    max(emitted_at) AS last_emitted,
    count() AS rows
FROM `toolaudit`.decisions_local
WHERE registry_version != '' AND emitted_at > toDateTime64(0, 3, 'UTC')
GROUP BY analysis_id, registry, registry_version;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.sessions_by_hour_local ON CLUSTER `prod`
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
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(hour)
ORDER BY (analysis_id, hour, registry, agent_id, model, session_id)
TTL hour + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.sessions_by_hour_mv ON CLUSTER `prod`
TO `toolaudit`.sessions_by_hour_local
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
FROM `toolaudit`.decisions_local
WHERE session_id != ''
GROUP BY hour, analysis_id, registry, agent_id, model, session_id;

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.call_path_decisions_local ON CLUSTER `prod`
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', decided_at)
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (analysis_id, emitted_at, call_key, source)
TTL greatest(emitted_at, decided_at) + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.call_path_decisions_mv ON CLUSTER `prod`
TO `toolaudit`.call_path_decisions_local
AS SELECT analysis_id, emitted_at, call_key, source, registry, agent_id, session_id, model, class, decided_at
FROM `toolaudit`.decisions_local
WHERE source IN ('api', 'gateway');

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.session_calls_local ON CLUSTER `prod`
(
    analysis_id LowCardinality(String),
    session_id  String                 CODEC(ZSTD(1)),
    emitted_at  DateTime64(3, 'UTC')   CODEC(T64, ZSTD(1)),
    call_key    String                 CODEC(ZSTD(1)),
    decided_at  DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', decided_at)
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (analysis_id, session_id, emitted_at, call_key)
TTL greatest(emitted_at, decided_at) + INTERVAL 400 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

-- 0007_analytics.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.session_calls_mv ON CLUSTER `prod`
TO `toolaudit`.session_calls_local
AS SELECT analysis_id, session_id, emitted_at, call_key, decided_at
FROM `toolaudit`.decisions_local
WHERE session_id != '';

-- 0007_analytics.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.registry_changes_local ON CLUSTER `prod`
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', recorded_at, deleted)
ORDER BY (registry, server, tool, observed_at);

-- 0008_decisions_approval.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod`
    ADD COLUMN IF NOT EXISTS approval LowCardinality(String) DEFAULT '' AFTER current_digest,
    ADD COLUMN IF NOT EXISTS baseline_version LowCardinality(String) DEFAULT '' AFTER approval;

-- 0009_approval_events.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.approval_events_local ON CLUSTER `prod`
(
    registry           LowCardinality(String),
    server             LowCardinality(String),
    tool               String                 CODEC(ZSTD(3)),
    digest             String                 CODEC(ZSTD(1)),
    description_digest String                 CODEC(ZSTD(1)),
    verb               LowCardinality(String),
    decided_by         String                 CODEC(ZSTD(3)),
    decided_at         DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1)),
    reason             String                 CODEC(ZSTD(3)),
    event_id           String                 CODEC(ZSTD(1)),
    baseline_version   UInt64,
    recorded_at        DateTime64(3, 'UTC')   CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', recorded_at)
ORDER BY (registry, server, tool, digest, decided_at, baseline_version);

-- 0010_rollups_from_groups.sql
DROP VIEW IF EXISTS `toolaudit`.decisions_by_minute_mv ON CLUSTER `prod`;

-- 0010_rollups_from_groups.sql
DROP VIEW IF EXISTS `toolaudit`.decisions_rollup_minute_mv ON CLUSTER `prod`;

-- 0010_rollups_from_groups.sql
DROP VIEW IF EXISTS `toolaudit`.decisions_rollup_hour_mv ON CLUSTER `prod`;

-- 0010_rollups_from_groups.sql
DROP VIEW IF EXISTS `toolaudit`.decisions_by_tool_day_mv ON CLUSTER `prod`;

-- 0010_rollups_from_groups.sql
DROP VIEW IF EXISTS `toolaudit`.fabricated_names_day_mv ON CLUSTER `prod`;

-- 0010_rollups_from_groups.sql
DROP VIEW IF EXISTS `toolaudit`.registry_versions_seen_mv ON CLUSTER `prod`;

-- 0010_rollups_from_groups.sql
CREATE TABLE IF NOT EXISTS `toolaudit`.decisions_groups ON CLUSTER `prod`
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

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_by_minute_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_by_minute_local
AS SELECT
    minute, analysis_id, registry, class, verdict, model, provider,
    sum(rows) AS rows,
    uniqMergeState(calls) AS calls,
    sum(drift) AS drift,
    sum(coercible) AS coercible
FROM `toolaudit`.decisions_groups
GROUP BY minute, analysis_id, registry, class, verdict, model, provider;

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_rollup_minute_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_rollup_minute_local
AS SELECT
    minute, analysis_id, registry, model, provider, surface, source, class, verdict,
    sum(rows) AS rows,
    sum(coercible) AS coercible,
    sum(drift) AS drift,
    sum(suggested) AS suggested
FROM `toolaudit`.decisions_groups
GROUP BY minute, analysis_id, registry, model, provider, surface, source, class, verdict;

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_rollup_hour_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_rollup_hour_local
AS SELECT
    toStartOfHour(minute) AS hour,
    analysis_id, registry, model, provider, surface, source, class, verdict,
    sum(rows) AS rows,
    sum(coercible) AS coercible,
    sum(drift) AS drift,
    sum(suggested) AS suggested
FROM `toolaudit`.decisions_groups
GROUP BY hour, analysis_id, registry, model, provider, surface, source, class, verdict;

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_by_tool_day_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_by_tool_day_local
AS SELECT
    toDate(minute, 'UTC') AS day,
    analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class,
    sum(rows) AS rows,
    sum(drift) AS drift
FROM `toolaudit`.decisions_groups
GROUP BY day, analysis_id, registry, source, resolved_server, resolved_tool, server, tool, class;

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.fabricated_names_day_mv ON CLUSTER `prod`
TO `toolaudit`.fabricated_names_day_local
AS SELECT
    toDate(minute, 'UTC') AS day,
    analysis_id, registry, source, model, surface, class, tool, suggested_tool,
    sum(rows) AS rows
FROM `toolaudit`.decisions_groups
WHERE class IN ('H1', 'M1')
GROUP BY day, analysis_id, registry, source, model, surface, class, tool, suggested_tool;

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.registry_versions_seen_mv ON CLUSTER `prod`
TO `toolaudit`.registry_versions_seen_local
AS SELECT
    analysis_id, registry, registry_version,
    min(first_emitted) AS first_emitted,
    max(last_emitted) AS last_emitted,
    sum(timed) AS rows
FROM `toolaudit`.decisions_groups
WHERE registry_version != '' AND timed > 0
GROUP BY analysis_id, registry, registry_version;

-- 0010_rollups_from_groups.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.decisions_groups_mv ON CLUSTER `prod`
TO `toolaudit`.decisions_groups
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
FROM `toolaudit`.decisions_local
GROUP BY minute, analysis_id, registry, registry_version, model, provider, surface, source, class, verdict,
    resolved_server, resolved_tool, server, tool, suggested_tool;

-- 0011_session_calls_in_sessions.sql
DROP VIEW IF EXISTS `toolaudit`.session_calls_mv ON CLUSTER `prod`;

-- 0011_session_calls_in_sessions.sql
ALTER TABLE `toolaudit`.sessions_by_hour_local ON CLUSTER `prod`
    ADD COLUMN IF NOT EXISTS call_keys SimpleAggregateFunction(groupArrayArray, Array(String)) CODEC(ZSTD(1));

-- 0011_session_calls_in_sessions.sql
DROP VIEW IF EXISTS `toolaudit`.sessions_by_hour_mv ON CLUSTER `prod`;

-- 0011_session_calls_in_sessions.sql
CREATE MATERIALIZED VIEW IF NOT EXISTS `toolaudit`.sessions_by_hour_mv ON CLUSTER `prod`
TO `toolaudit`.sessions_by_hour_local
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
FROM `toolaudit`.decisions_local
WHERE session_id != ''
GROUP BY hour, analysis_id, registry, agent_id, model, session_id;

-- 0012_decisions_merges.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod` MODIFY SETTING
    vertical_merge_algorithm_min_rows_to_activate = 1000000000,
    auto_statistics_types = '';

-- 0013_decisions_trace.sql
ALTER TABLE `toolaudit`.decisions_local ON CLUSTER `prod`
    ADD COLUMN IF NOT EXISTS trace_id String DEFAULT '' CODEC(ZSTD(1)) AFTER offset,
    ADD COLUMN IF NOT EXISTS span_id String DEFAULT '' CODEC(ZSTD(1)) AFTER trace_id;

CREATE OR REPLACE TABLE `toolaudit`.decisions ON CLUSTER `prod` AS `toolaudit`.decisions_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_local`, cityHash64(call_key));

CREATE OR REPLACE TABLE `toolaudit`.decisions_by_minute ON CLUSTER `prod` AS `toolaudit`.decisions_by_minute_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_by_minute_local`);

CREATE OR REPLACE TABLE `toolaudit`.call_events ON CLUSTER `prod` AS `toolaudit`.call_events_local
ENGINE = Distributed(`prod`, `toolaudit`, `call_events_local`, cityHash64(topic, partition, offset));

CREATE OR REPLACE TABLE `toolaudit`.decisions_rollup_minute ON CLUSTER `prod` AS `toolaudit`.decisions_rollup_minute_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_rollup_minute_local`);

CREATE OR REPLACE TABLE `toolaudit`.decisions_rollup_hour ON CLUSTER `prod` AS `toolaudit`.decisions_rollup_hour_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_rollup_hour_local`);

CREATE OR REPLACE TABLE `toolaudit`.decisions_by_tool_day ON CLUSTER `prod` AS `toolaudit`.decisions_by_tool_day_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_by_tool_day_local`);

CREATE OR REPLACE TABLE `toolaudit`.fabricated_names_day ON CLUSTER `prod` AS `toolaudit`.fabricated_names_day_local
ENGINE = Distributed(`prod`, `toolaudit`, `fabricated_names_day_local`);

CREATE OR REPLACE TABLE `toolaudit`.registry_versions_seen ON CLUSTER `prod` AS `toolaudit`.registry_versions_seen_local
ENGINE = Distributed(`prod`, `toolaudit`, `registry_versions_seen_local`);

CREATE OR REPLACE TABLE `toolaudit`.sessions_by_hour ON CLUSTER `prod` AS `toolaudit`.sessions_by_hour_local
ENGINE = Distributed(`prod`, `toolaudit`, `sessions_by_hour_local`);

CREATE OR REPLACE TABLE `toolaudit`.call_path_decisions ON CLUSTER `prod` AS `toolaudit`.call_path_decisions_local
ENGINE = Distributed(`prod`, `toolaudit`, `call_path_decisions_local`);

CREATE OR REPLACE TABLE `toolaudit`.session_calls ON CLUSTER `prod` AS `toolaudit`.session_calls_local
ENGINE = Distributed(`prod`, `toolaudit`, `session_calls_local`);

CREATE OR REPLACE TABLE `toolaudit`.registry_changes ON CLUSTER `prod` AS `toolaudit`.registry_changes_local
ENGINE = Distributed(`prod`, `toolaudit`, `registry_changes_local`, cityHash64(registry, server, tool));

CREATE OR REPLACE TABLE `toolaudit`.approval_events ON CLUSTER `prod` AS `toolaudit`.approval_events_local
ENGINE = Distributed(`prod`, `toolaudit`, `approval_events_local`, cityHash64(registry, server, tool));

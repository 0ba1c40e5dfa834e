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

CREATE OR REPLACE TABLE `toolaudit`.decisions ON CLUSTER `prod` AS `toolaudit`.decisions_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_local`, cityHash64(call_key));

CREATE OR REPLACE TABLE `toolaudit`.decisions_by_minute ON CLUSTER `prod` AS `toolaudit`.decisions_by_minute_local
ENGINE = Distributed(`prod`, `toolaudit`, `decisions_by_minute_local`);

CREATE OR REPLACE TABLE `toolaudit`.call_events ON CLUSTER `prod` AS `toolaudit`.call_events_local
ENGINE = Distributed(`prod`, `toolaudit`, `call_events_local`, cityHash64(topic, partition, offset));

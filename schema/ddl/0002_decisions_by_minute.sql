-- decisions_by_minute: the dashboards' rollup, fed by a materialized view on
-- every INSERT into decisions.
--
-- Redelivery. An MV sees inserted blocks, not the table after FINAL, so a
-- call decided twice (Kafka redelivery after a crash) reaches the MV twice:
-- `rows` counts it twice (it is approximate under redelivery, and
-- rows - uniqMerge(calls) is the redelivery volume). `calls` is an
-- aggregate state of uniq(call_key) instead, which the second delivery does
-- not change because the call lands on the same key (same minute of
-- emitted_at, same analysis, same class): uniqMerge(calls) is the number of
-- distinct calls, exact up to 65,536 distinct calls per group (uniq keeps
-- every hash until then) and within about 1% beyond. Dashboards use
-- uniqMerge(calls). Two caveats: a redelivered call whose decision changed
-- class is counted under both classes; and a timeless MALFORMED call
-- (emitted_at 1970) is bucketed by its decided_at minute, so its redelivery
-- falls in another minute and counts twice. An exact retry of the same
-- batch is dropped by the insert deduplication of decisions and of this table
-- (non_replicated_deduplication_window on both tables).
--
-- Exact numbers come from decisions FINAL (sink.ClickHouse.Counts).
CREATE TABLE IF NOT EXISTS {db}.decisions_by_minute
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
ENGINE = AggregatingMergeTree
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

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.decisions_by_minute_mv
TO {db}.decisions_by_minute
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
FROM {db}.decisions
GROUP BY minute, analysis_id, registry, class, verdict, model, provider;

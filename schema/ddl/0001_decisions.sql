-- decisions: one row per decided call (schema.Row), written by sink.ClickHouse.
--
-- Identity and deduplication. The key is (analysis_id, call_key): a call is
-- decided once per analysis. Kafka redelivers after a crash (offsets are
-- committed only after the sink acknowledged), and a redelivered call is
-- decided again, later. ReplacingMergeTree(decided_at) keeps, per key, the
-- row with the greatest decided_at (the last inserted on a tie) when parts
-- merge; queries that must be exact read with FINAL. A re-run under a new
-- analysis_id sits beside the old one.
--
-- Partitioning is by the month of emitted_at, not decided_at: ClickHouse
-- deduplicates only within a partition, and a redelivered call has the same
-- emitted_at but a later decided_at. A row without a usable time (MALFORMED
-- with no or a bad emitted_at) is stored with emitted_at =
-- 1970-01-01 00:00:00.000 (partition 197001); readers turn it back into "no
-- time". Times outside 1900-01-01..2262-04-11 are clamped by the writer.
--
-- Codecs, measured on 1M synthetic rows in batches of 10k (emitted_at
-- jittered within each batch's 10 s, decided_at at the end of it, offsets
-- from 8 partitions), merged into one part, compression ratio with random
-- call keys (UUID-like event ids) / time-ordered ones ("c-0001"...):
--   emitted_at  T64+ZSTD 2.9 / 4.2   Delta+ZSTD 2.2 / 3.1   DoubleDelta 2.0 / 2.5   ZSTD 2.5 / 4.0
--   decided_at  T64+ZSTD 3.0 / 80    Delta+ZSTD 2.7 / 318   DoubleDelta 2.0 / 697
--   offset      T64+ZSTD 3.3 / 32    Delta+ZSTD 2.7 / 822   ZSTD 2.8 / 4.6
-- Rows are sorted by call_key, not time, so times are not monotonic within
-- a part and DoubleDelta (made for regular series) never wins on the
-- random case; T64 crops the high bits that all values of a block share (a
-- part spans a narrow time range). decided_at is Delta: close to T64 on
-- random keys, far better on ordered ones (within a batch it is constant).
-- offset is T64 (random keys, the common case: hosts use UUIDs).
-- Hex digests and hashes: ZSTD(1) halves them (LZ4 gets 1.2). Free text
-- (reason, path, args_shape, args_raw) repeats a lot: ZSTD(3). Columns with
-- a bounded set of values (verdict, class, registry, model, tool names,
-- agents...) are LowCardinality: a dictionary per part plus small integer
-- keys, cheap to filter and group by on dashboards.
CREATE TABLE IF NOT EXISTS {db}.decisions
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
ENGINE = ReplacingMergeTree(decided_at)
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

-- call_events: the archive of the calls topic, for re-analysis beyond
-- Kafka's retention (resolverd reanalyze --source archive). Opt-in: the
-- table is created everywhere but written only by resolverd run
-- --archive-calls, which stores every record of the calls topic as it was
-- produced, in the same flush as its decision and before the offset is
-- committed.
--
-- Access. Arguments are untrusted and may hold secrets: decisions keeps
-- only their shape and hash, this table the events as produced (the calls
-- topic's exposure, kept longer). Grant SELECT on it only to whoever
-- re-analyses, e.g.
--   CREATE ROLE reanalyst; GRANT SELECT ON toolaudit.call_events TO reanalyst;
-- and give the dashboards' users decisions and the rollups only (GRANT
-- SELECT ON toolaudit.decisions ..., never toolaudit.*). resolverd run
-- needs INSERT on it only with --archive-calls.
--
-- Retention: 90 days, counted, as for decisions, from the later of
-- emitted_at and the archiving, so that a backlog archived late is not
-- expired at once. Change it with
--   ALTER TABLE toolaudit.call_events MODIFY TTL greatest(emitted_at, archived_at) + INTERVAL 30 DAY
-- Partitions are days, so expiry drops whole days (ttl_only_drop_parts).
--
-- emitted_at is the window's time (schema.WindowTime): the call's
-- emitted_at, or the record's timestamp for an event without a usable
-- one (MALFORMED). The sort key starts with it, so a window is a range
-- of the primary index; it ends with the record's position, which is what
-- deduplicates: a record redelivered after a crash is archived again with
-- the same emitted_at and position, and ReplacingMergeTree keeps one
-- (reads use FINAL). An identical retried INSERT is dropped at once
-- (non_replicated_deduplication_window).
--
-- Compression: value (the JSON event) ZSTD(3); the corpus's calls are
-- about 10x smaller compressed. The record key (the session) ZSTD(1).
CREATE TABLE IF NOT EXISTS {db}.call_events
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
ENGINE = ReplacingMergeTree(archived_at)
PARTITION BY toYYYYMMDD(emitted_at)
ORDER BY (emitted_at, topic, partition, offset)
TTL greatest(emitted_at, archived_at) + INTERVAL 90 DAY
SETTINGS
    ttl_only_drop_parts = 1,
    non_replicated_deduplication_window = 1000;

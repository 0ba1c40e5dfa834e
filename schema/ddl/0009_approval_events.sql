-- approval_events: the history of the approved baseline (package
-- approvals), every approval event of the approvals topic, kept beyond
-- the topic's compaction (which keeps only each definition's last
-- verdict): who approved, rejected or revoked which definition, when and
-- why. Written by the resolverd that runs with --registry-history
-- (package approvals/history), which reads the topic from its start at
-- every start and then follows it. verb is approve, reject or revoke;
-- digest the definition's contract digest (name and inputSchema),
-- description_digest its description's when reviewed ('' otherwise);
-- decided_by and decided_at the event's by and at; baseline_version the
-- baseline version the event makes (its offset in the topic + 1: the
-- order in which the baseline applies events, which a definition's
-- standing follows: argMax(verb, baseline_version)); recorded_at when it
-- was written here.
--
-- A redelivered event (every start reads the topic again) has the same
-- key and collapses; FINAL reads each once. decided_at is in the key so
-- that a topic recreated from a lockfile (offsets from 0 again) adds its
-- events beside the old ones rather than replacing them.
CREATE TABLE IF NOT EXISTS {db}.approval_events
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
ENGINE = ReplacingMergeTree(recorded_at)
ORDER BY (registry, server, tool, digest, decided_at, baseline_version);

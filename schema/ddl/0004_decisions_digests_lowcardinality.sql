-- decisions: seen_digest and current_digest become LowCardinality. A digest
-- names one tool definition (spec: sha256 of name and inputSchema), so a
-- part holds about as many distinct digests as tool definitions were
-- called: hundreds to a few thousand, like resolved_tool, which is
-- LowCardinality already. As Strings they were up to 144 bytes per row
-- ("sha256:" and 64 hex digits, twice) that every INSERT and every merge
-- compressed again; as LowCardinality they are a dictionary per part plus
-- one or two bytes of key per row. Measured on the benchmark's 1M-call
-- backlog (the engine beside resolverd on 2 cores, four rounds of
-- resolution and passthrough, String and LowCardinality interleaved): the
-- engine's CPU with resolution went from 1.23-1.45x to 1.12-1.17x that of
-- passthrough (whose rows have no digests), calls/s with resolution from
-- 88k-107k to 93k-120k; on disk each column went from 3.7 MB to 0.14 MB per
-- 1M rows of the corpus. seen_digest is the caller's pin and can be
-- anything: a flood of distinct values makes the dictionaries large, which
-- ClickHouse handles (keys spill into per-granule dictionaries), more
-- slowly. On a table with data, this ALTER rewrites the two columns of
-- every part in the background (a mutation); system.mutations shows its
-- progress, and reads and writes go on.
ALTER TABLE {db}.decisions
    MODIFY COLUMN seen_digest LowCardinality(String) CODEC(ZSTD(1)),
    MODIFY COLUMN current_digest LowCardinality(String) CODEC(ZSTD(1));

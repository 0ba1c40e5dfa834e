-- decisions: seen_digest and current_digest become LowCardinality. A digest
-- names one tool definition (spec: sha256 of name and inputSchema), so a
-- part holds about as many distinct digests as tool definitions were
-- called: hundreds to a few thousand, like resolved_tool, which is
-- LowCardinality already. As Strings they were up to 144 bytes per row
-- ("sha256:" and 64 hex digits, twice) that every INSERT and every merge
-- compressed again; as LowCardinality they are a dictionary per part plus
-- one or two bytes of key per row. Measured on the benchmark's 1M-call
-- backlog (the engine beside resolverd on 2 cores, six rounds of resolution
-- and passthrough with String and LowCardinality digests interleaved, in
-- both orders): the engine's CPU with resolution was 1.16x that of
-- passthrough (whose rows have no digests) on average, against 1.32x,
-- though single rounds overlap (1.12-1.21 against 1.11-1.45); calls/s did
-- not differ beyond the noise. On disk each column went from 3.7 MB to 0.14
-- MB per 1M rows of the corpus. seen_digest is the caller's pin and can be
-- anything: a flood of distinct values makes the dictionaries large, which
-- ClickHouse handles by starting a new one whenever one reaches 8,192
-- values (low_cardinality_max_dictionary_size), more slowly. On a table
-- with data, this ALTER rewrites the two columns of every part in the
-- background (a mutation); system.mutations shows its progress, and reads
-- and writes go on.
ALTER TABLE {db}.decisions
    MODIFY COLUMN seen_digest LowCardinality(String) CODEC(ZSTD(1)),
    MODIFY COLUMN current_digest LowCardinality(String) CODEC(ZSTD(1));

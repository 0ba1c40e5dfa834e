-- decisions: cheaper merges. Background merges rewrite every row again at
-- each level of merging, and one merge of decisions costs the engine more
-- CPU per row than inserting it (4.4 - 5.4 us against 3 with every view;
-- PROFILE=0 scripts/bench-engine.sh 500000, "one merge of decisions": five
-- 100,000-row parts into one).
--
-- Horizontal merges (all columns of a block at once), not vertical ones
-- (the key columns first, then every other column in a pass of its own),
-- which ClickHouse picks for parts of 131,072 rows and more with 11 or more
-- non-key columns: the vertical algorithm saves memory on very wide rows,
-- and cost more CPU here, 5.16 - 5.42 us per row against 4.40 - 4.60 (two
-- rounds each, alternated). A horizontal merge holds a block of every
-- column: merge_max_block_size (8,192 rows) and merge_max_block_size_bytes
-- (10 MiB) bound it, raw arguments included.
--
-- No automatic column statistics (ClickHouse 26.7 computes basic and
-- uniq_v2 for every column of every part, at insert and at merge, for the
-- optimizer): decisions is read by its primary key (the drill-down, the
-- time-of-check view, re-analysis diffs) and the dashboards read the
-- rollups. One merge 4.38 - 4.62 -> 4.06 - 4.32 us per row (three rounds
-- each, alternated); inserts unchanged.
ALTER TABLE {db}.decisions MODIFY SETTING
    vertical_merge_algorithm_min_rows_to_activate = 1000000000,
    auto_statistics_types = '';

#!/usr/bin/env bash
# What the engine would save if resolverd grouped each batch for the
# rollups itself (issue 25's design question): the two views that group
# every row of decisions (decisions_groups_mv, sessions_by_hour_mv) against
# their groups written by the writer as two more INSERTs per batch. ROWS
# corpus calls are decided once (as scripts/bench-engine.sh), kept in a
# Memory table with, per block of 100,000, the groups those two views
# would make of it (computed before, by the views' own SELECTs: the cost
# of grouping in resolverd is not in it). Then, in alternated rounds, a
# fresh database per variant: "all" inserts the blocks into decisions with
# every view; "pregrouped" drops the two grouping views and inserts each
# block into decisions, its groups into decisions_groups (which feeds the
# six rollups) and its sessions into sessions_by_hour. Printed: the
# engine's CPU per row of decisions for the INSERTs, and with the merges
# of the views' tables that follow (decisions' own merges held), and the
# rows two rollups and sessions_by_hour count (the same in every variant
# that feeds them). "rare" is the rollups written apart from decisions
# and less often: the groups of GROUP_BLOCKS blocks at a time (default
# 10, a million rows), inserted after every GROUP_BLOCKS-th block of
# decisions, as a writer that aggregated for the rollups itself and
# flushed them every few seconds would. "none" drops the two grouping
# views and feeds no rollup: decisions alone. "gated" is "rare" with the
# two grouping views kept on decisions but off for these INSERTs, as a
# design that keeps them for every other writer would have them: each
# view's SELECT gains a condition that is false for the INSERTs of the
# writer that feeds the rollups itself (here their log_comment; the
# mechanism is a design question, the cost is the views' fixed cost on a
# block they drop whole). The backlog repeats the
# corpus, so the groups of five blocks are hardly more than one block's;
# a stream's would grow more with the window.
# Usage: [ROUNDS=3] [VARIANTS='all pregrouped rare gated none'] [GROUP_BLOCKS=10] scripts/bench-engine-pregrouped.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
gb=${GROUP_BLOCKS:-10}
[ "$gb" -ge 1 ] 2>/dev/null || { echo "bench: GROUP_BLOCKS must be a number of blocks, 1 or more" >&2; exit 2; }
variants=${VARIANTS:-all pregrouped rare gated none}
for v in $variants; do
  case $v in all|pregrouped|rare|gated|none) ;; *) echo "bench: variant $v is none of all, pregrouped, rare, gated, none" >&2; exit 2 ;; esac
done
. scripts/bench-stack.sh
decide_rows
block=100000
nb=$(( (rows + block - 1) / block ))
gsel=$(q "SELECT as_select FROM system.tables WHERE database='toolaudit' AND name='decisions_groups_mv' FORMAT TSVRaw")
ssel=$(q "SELECT as_select FROM system.tables WHERE database='toolaudit' AND name='sessions_by_hour_mv' FORMAT TSVRaw")
q "CREATE TABLE toolaudit.bench_groups ENGINE = Memory AS SELECT 0 AS blk, * FROM (${gsel//toolaudit.decisions/(SELECT * FROM toolaudit.bench_rows LIMIT 0)})"
q "CREATE TABLE toolaudit.bench_sessions ENGINE = Memory AS SELECT 0 AS blk, * FROM (${ssel//toolaudit.decisions/(SELECT * FROM toolaudit.bench_rows LIMIT 0)})"
q "CREATE TABLE toolaudit.bench_groups_rare AS toolaudit.bench_groups"
q "CREATE TABLE toolaudit.bench_sessions_rare AS toolaudit.bench_sessions"
# pre TABLE BLOCK N: the two views' groups of N blocks from BLOCK on, as
# block BLOCK / N of TABLE's two tables.
pre() {
  local src="(SELECT * FROM toolaudit.bench_rows LIMIT $(($3 * block)) OFFSET $(($2 * block)) SETTINGS max_threads=1)"
  q "INSERT INTO toolaudit.bench_groups$1 SELECT $(($2 / $3)), * FROM (${gsel//toolaudit.decisions/$src})"
  q "INSERT INTO toolaudit.bench_sessions$1 SELECT $(($2 / $3)), * FROM (${ssel//toolaudit.decisions/$src})"
}
for ((i = 0; i < nb; i++)); do
  pre "" "$i" 1
  [ $((i % gb)) = 0 ] && pre _rare "$i" "$gb"
done
echo "rows $rows, groups $(q "SELECT count() FROM toolaudit.bench_groups") (of $gb blocks at a time: $(q "SELECT count() FROM toolaudit.bench_groups_rare")), session rows $(q "SELECT count() FROM toolaudit.bench_sessions") ($(q "SELECT count() FROM toolaudit.bench_sessions_rare"))"
variant() {
  local v=$1
  q "DROP DATABASE IF EXISTS bench_v SYNC"
  "$work/resolverd" migrate --clickhouse "$CH" --database bench_v > /dev/null 2>&1
  if [ "$v" = gated ]; then
    local mv sel cond="getSetting('log_comment') != 'rollups-by-writer'"
    for mv in decisions_groups sessions_by_hour; do
      sel=$(q "SELECT as_select FROM system.tables WHERE database='bench_v' AND name='${mv}_mv' FORMAT TSVRaw")
      case $sel in
        *" WHERE "*) sel=${sel/ WHERE / WHERE $cond AND } ;;
        *) sel=${sel/ GROUP BY / WHERE $cond GROUP BY } ;;
      esac
      q "DROP VIEW bench_v.${mv}_mv"
      q "CREATE MATERIALIZED VIEW bench_v.${mv}_mv TO bench_v.$mv AS $sel"
    done
  elif [ "$v" != all ]; then q "DROP VIEW bench_v.decisions_groups_mv"; q "DROP VIEW bench_v.sessions_by_hour_mv"; fi
  quiet
  q "INSERT INTO bench_v.decisions SELECT * REPLACE ('warm' AS analysis_id) FROM toolaudit.bench_rows LIMIT 10000"
  if [ "$v" = pregrouped ] || [ "$v" = rare ] || [ "$v" = gated ]; then
    q "INSERT INTO bench_v.decisions_groups SELECT * EXCEPT blk REPLACE ('warm' AS analysis_id) FROM toolaudit.bench_groups WHERE blk = 0"
    q "INSERT INTO bench_v.sessions_by_hour SELECT * EXCEPT blk REPLACE ('warm' AS analysis_id) FROM toolaudit.bench_sessions WHERE blk = 0"
  fi
  quiet
  q "SYSTEM STOP MERGES bench_v.decisions"
  local e0 e1 e2 i set="SETTINGS max_threads = 1, optimize_on_insert = 0" dset=
  [ "$v" = gated ] && dset=", log_comment = 'rollups-by-writer'"
  e0=$(cpu "$engine")
  for ((i = 0; i < nb; i++)); do
    q "INSERT INTO bench_v.decisions SELECT * FROM toolaudit.bench_rows LIMIT $block OFFSET $((i * block)) $set, max_insert_block_size = $block, min_insert_block_size_rows = $block$dset"
    if [ "$v" = pregrouped ]; then
      q "INSERT INTO bench_v.decisions_groups SELECT * EXCEPT blk FROM toolaudit.bench_groups WHERE blk = $i $set"
      q "INSERT INTO bench_v.sessions_by_hour SELECT * EXCEPT blk FROM toolaudit.bench_sessions WHERE blk = $i $set"
    elif { [ "$v" = rare ] || [ "$v" = gated ]; } && { [ $(((i + 1) % gb)) = 0 ] || [ $((i + 1)) = "$nb" ]; }; then
      q "INSERT INTO bench_v.decisions_groups SELECT * EXCEPT blk FROM toolaudit.bench_groups_rare WHERE blk = $((i / gb)) $set"
      q "INSERT INTO bench_v.sessions_by_hour SELECT * EXCEPT blk FROM toolaudit.bench_sessions_rare WHERE blk = $((i / gb)) $set"
    fi
  done
  e1=$(cpu "$engine")
  quiet
  e2=$(cpu "$engine")
  python3 -c "import sys; r=int(sys.argv[2]); print('%-12s insert %5.2f us/row; with the views\u2019 merges %5.2f us/row' % (sys.argv[1], (int(sys.argv[4])-int(sys.argv[3]))/100/r*1e6, (int(sys.argv[5])-int(sys.argv[3]))/100/r*1e6))" "$v" "$rows" "$e0" "$e1" "$e2"
  for t in decisions_by_minute decisions_rollup_hour sessions_by_hour; do
    echo "   $t $(q "SELECT sum(rows) FROM bench_v.$t WHERE analysis_id != 'warm'")"
  done
}
# Each round starts one variant further on (the machine's speed drifts:
# no variant always runs in the same place).
read -ra vs <<< "$variants"
for round in $(seq "${ROUNDS:-3}"); do
  for ((k = 0; k < ${#vs[@]}; k++)); do variant "${vs[$(((k + round - 1) % ${#vs[@]}))]}"; done
done

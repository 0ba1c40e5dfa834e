#!/usr/bin/env bash
# The ClickHouse engine's cost of storing decided calls, per table and per
# materialized view (issue 25's split). A resolve run on `resolverd stack`
# decides ROWS corpus calls into toolaudit.decisions and the rows are kept
# in a Memory table. Then, in alternated rounds, each variant gets a fresh
# database migrated in full (`resolverd migrate --database bench_v`) and
# the rows are inserted into its decisions with the writer's settings, one
# INSERT ... SELECT per block of BLOCK rows (default 100,000, the writer's
# batch), after a first INSERT that is not measured (the engine compiles
# a view's expressions at its first INSERT). Native-protocol parsing is
# not in it (the rows come from memory): it is the same for every variant.
#
# A variant is "none" (no view), "all", one view's name (only that view,
# and the grouping that feeds it if it reads decisions_groups), or a file
# of statements, one a line, run after migrating (a table's variant).
#
# Printed per variant, as the engine's CPU per row: "insert", the INSERTs;
# "with the views' merges", until the background merges settle (decisions'
# own merges held); "one merge of decisions", its parts then merged into
# one (OPTIMIZE FINAL), which background merges do to every row at each
# level; the parts left. MERGES=natural lets decisions merge as the server
# would instead (no OPTIMIZE: its merges are in the second figure).
# A file variant may drop columns of decisions (with the indexes on
# them): each INSERT names the columns the variant's table has.
# SORTED=1 sends each block in the table's sort order.
# PROFILE=1 adds the split per stage (scripts/bench-stack.sh).
# Usage: [ROUNDS=3] [VARIANTS='none all VIEW... FILE...'] [BLOCK=100000] [MERGES=held] [SORTED=0] [PROFILE=0] scripts/bench-engine.sh [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300000}
. scripts/bench-stack.sh

decide_rows
# SORTED=1: each block's rows in the table's sort order, as a writer that
# sorted its batch would send them (the engine then skips its sort).
src=bench_rows
if [ "${SORTED:-0}" = 1 ]; then
  src=bench_sorted
  q "CREATE TABLE toolaudit.bench_sorted ENGINE = Memory AS SELECT * EXCEPT blk FROM (SELECT *, intDiv(rowNumberInAllBlocks(), ${BLOCK:-100000}) AS blk FROM toolaudit.bench_rows) ORDER BY blk, analysis_id, call_key, source SETTINGS max_block_size = ${BLOCK:-100000}"
fi
views=$(q "SELECT name FROM system.tables WHERE database = 'toolaudit' AND engine = 'MaterializedView' ORDER BY name FORMAT TSV")
echo "rows: $rows; views on decisions: $(echo $views)"

block=${BLOCK:-100000}
variant() { # name: none, all, one view's name, or a file of SQL run after migrating (a table variant)
  local v=$1
  q "DROP DATABASE IF EXISTS bench_v SYNC"
  "$work/resolverd" migrate --clickhouse "$CH" --database bench_v > /dev/null 2>&1
  if [ -f "$v" ]; then
    while IFS= read -r stmt; do [ -n "$stmt" ] && q "$stmt"; done < "$v"
  else
    # A view fed by decisions_groups (migration 0010) keeps the grouping
    # view that feeds it.
    local feeder=""
    [ "$(q "SELECT count() FROM system.tables WHERE database = 'bench_v' AND name = '$v' AND position(create_table_query, 'decisions_groups') > 0")" = 1 ] &&
      feeder=decisions_groups_mv
    for m in $views; do
      case $v in all|"$m") continue ;; esac
      [ "$m" = "$feeder" ] || q "DROP VIEW bench_v.$m"
    done
  fi
  quiet
  # A first INSERT of 10,000 rows, not measured: the engine compiles a
  # view's expressions and builds its pipeline at its first INSERT (a
  # one-time cost, 0.5 s and more with all views).
  # The columns the variant's decisions has (a variant may drop some).
  local cols; cols=$(q "SELECT arrayStringConcat(groupArray(name), ', ') FROM (SELECT name FROM system.columns WHERE database = 'bench_v' AND table = 'decisions' ORDER BY position)")
  local warm; warm=$(sed -E "s/(^|, )analysis_id(,|$)/\1'warm' AS analysis_id\2/" <<< "$cols")
  q "INSERT INTO bench_v.decisions ($cols) SELECT $warm FROM toolaudit.bench_rows LIMIT 10000"
  quiet
  local e0 e1 e2 s t i
  # decisions' own merges wait for the end (below): whether one ran
  # within a variant's measurement depended on timing.
  [ "${MERGES:-held}" = held ] && q "SYSTEM STOP MERGES bench_v.decisions"
  local since; since=$(q "SELECT now64(6)")
  e0=$(cpu "$engine"); s=$(date +%s.%N)
  # One INSERT per block, as the writer sends its batches.
  for ((i = 0; i * block < rows; i++)); do
    q "INSERT INTO bench_v.decisions ($cols) SELECT $cols FROM toolaudit.$src LIMIT $block OFFSET $((i * block))
       SETTINGS max_insert_block_size = $block, min_insert_block_size_rows = $block, max_threads = 1, optimize_on_insert = 0${INSERT_SETTINGS:-}"
  done
  e1=$(cpu "$engine"); t=$(date +%s.%N)
  quiet
  e2=$(cpu "$engine")
  # Then every part of decisions merged into one, as background merges
  # do to every row again and again (each level of merging rewrites it).
  if [ "${MERGES:-held}" = held ]; then
    q "SYSTEM START MERGES bench_v.decisions"
    q "OPTIMIZE TABLE bench_v.decisions FINAL"
  fi
  local e3; e3=$(cpu "$engine")
  local parts; parts=$(q "SELECT count() FROM system.parts WHERE database = 'bench_v' AND table = 'decisions' AND active")
  python3 -c "import sys; r=int(sys.argv[2]); print('%-32s insert %5.2f s wall, %5.2f us/row; with the views\u2019 merges %5.2f us/row; one merge of decisions %5.2f us/row; %s parts of decisions at the end' % (sys.argv[1], float(sys.argv[4])-float(sys.argv[3]), (int(sys.argv[6])-int(sys.argv[5]))/100/r*1e6, (int(sys.argv[7])-int(sys.argv[5]))/100/r*1e6, (int(sys.argv[8])-int(sys.argv[7]))/100/r*1e6, sys.argv[9]))" \
    "$v" "$rows" "$s" "$t" "$e0" "$e1" "$e2" "$e3" "$parts"
  profile "$since" "$rows" bench_v
}

# A mistyped variant would silently measure "none": refuse it.
for v in ${VARIANTS:-}; do
  case " none all $(echo $views) " in *" $v "*) continue ;; esac
  [ -f "$v" ] || { echo "bench-engine: variant $v is neither none, all, a view of decisions ($(echo $views)) nor a file" >&2; exit 2; }
done

for round in $(seq "${ROUNDS:-3}"); do
  echo "round $round"
  list=${VARIANTS:-none all $views}
  [ $((round % 2)) = 0 ] && list=$(echo $list | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $list; do variant "$v"; done
done
q "DROP DATABASE IF EXISTS bench_v SYNC"

# Sourced by scripts/bench-pipeline.sh, bench-engine.sh and
# bench-reanalyze.sh, with N (calls) set: builds resolverd and ingest into
# $work, writes the backlog (corpus calls, sample and BFCL, with unique
# event ids), starts `resolverd stack` on free ports, migrates, ingests the
# backlog, and defines KAFKA, CH, CH_HTTP, stackpid, engine (the stack's
# engine process), cpu PID (its user+system clock ticks), q SQL (a query
# over HTTP), quiet (wait until no merge has run for 3 s) and settle
# TABLE... (truncate them, then quiet). With PROFILE=1 the engine keeps its
# system logs (scripts/engine-profile.xml) and profile SINCE ROWS prints
# where its CPU went from SINCE (a time from `now64(6)`): INSERTs, each
# materialized view, merges, and the INSERTs' own timers. Its EXIT trap
# stops the stack and the run whose pid is in $work/pid, and removes $work.
export PATH="/usr/local/go/bin:$PATH"
work=$(mktemp -d)

go build -o "$work/" ./cmd/resolverd ./cmd/ingest
scripts/fetch-chengine.sh > /dev/null

# The backlog's times are moved into one month. The corpus's two parts
# were written on either side of a month's end (BFCL's calls on
# 2026-11-29, the sample's on 2026-12-01), so each batch of the corpus as
# it is falls into two monthly partitions, and every INSERT writes two
# parts to decisions, to decisions_peer and to each rollup, where a live
# stream's batch of a second writes one (but at a month's turn). Every
# call's and listing's date moves by the same days, which keeps their
# order and so every decision: SHIFT_DAYS, by default -5 (2026-11-24 and
# 2026-11-26; 0: the corpus's own times). (A call without a usable time
# goes with the record time ingest gives it, the event's before it.)
python3 - "$N" "$work/calls.jsonl" "$work/listings.jsonl" "${SHIFT_DAYS:--5}" <<'PY'
import datetime, re, sys
n, out, listings, days = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
when = re.compile(r'"(emitted_at|observed_at)": "(\d{4}-\d{2}-\d{2})')
files = ('testdata/corpus/sample/listings.jsonl', 'testdata/corpus/bfcl/listings.jsonl',
         'testdata/corpus/sample/calls.jsonl', 'testdata/corpus/bfcl/calls.jsonl')
def moved(l):
    def day(m):
        try:
            d = datetime.date.fromisoformat(m.group(2)) + datetime.timedelta(days=days)
        except (ValueError, OverflowError): # not a date, or moved out of the calendar: as it is
            return m.group(0)
        return '"%s": "%s' % (m.group(1), d.isoformat())
    return when.sub(day, l, count=1)
with open(listings, 'w') as w:
    for f in files[:2]:
        w.writelines(moved(l) for l in open(f))
lines = [moved(l.rstrip('\n')) for f in files[2:] for l in open(f)]
with open(out, 'w') as w:
    for i in range(n):
        l = lines[i % len(lines)]
        w.write(l.replace('"event_id": "', '"event_id": "r%d-' % (i // len(lines)), 1) + '\n')
PY

# Free ports, so that the bench runs beside a demo or another stack; the
# stack prints the addresses it chose.
profcfg=()
[ "${PROFILE:-0}" = 1 ] && profcfg=(--clickhouse-config scripts/engine-profile.xml)
"$work/resolverd" stack --dir "$work/data" --kafka-port 0 --clickhouse-port 0 --clickhouse-http-port 0 --http "" "${profcfg[@]}" > "$work/stack.log" 2>&1 &
stackpid=$!
echo $stackpid > "$work/stackpid"
trap 'kill -INT $(cat "$work/pid" "$work/stackpid" 2>/dev/null) 2>/dev/null; sleep 2; rm -rf "$work"' EXIT
for _ in $(seq 60); do grep -q "Ctrl-C" "$work/stack.log" && break; sleep 0.5; done
# "kafka 127.0.0.1:P, clickhouse 127.0.0.1:Q (http 127.0.0.1:R); Ctrl-C stops"
addrs=$(grep -m1 "Ctrl-C" "$work/stack.log") || { echo "bench: the stack did not start:" >&2; cat "$work/stack.log" >&2; exit 1; }
KAFKA=$(sed -E 's/.*kafka ([0-9.]+:[0-9]+).*/\1/' <<< "$addrs")
CH=$(sed -E 's/.*clickhouse ([0-9.]+:[0-9]+).*/\1/' <<< "$addrs")
CH_HTTP=$(sed -E 's/.*http ([0-9.]+:[0-9]+).*/\1/' <<< "$addrs")
echo "stack: kafka $KAFKA, clickhouse $CH, http $CH_HTTP"
"$work/resolverd" migrate --clickhouse "$CH" > /dev/null 2>&1
echo "loading the backlog: $N calls"
"$work/ingest" --brokers "$KAFKA" "$work/listings.jsonl" "$work/calls.jsonl" 2>&1 | tail -1

cpu() { awk '{print $14+$15}' "/proc/$1/stat"; } # user+system clock ticks
# This stack's engine: a child of the stack process (other engines may run
# on the machine).
engine=$(pgrep -P "$stackpid" -f chengine-engine -n)

q() { curl -sS --fail-with-body "http://$CH_HTTP/" --data-binary "$1"; }
settle() { # tables to truncate...
  for t in "$@"; do q "TRUNCATE TABLE toolaudit.$t"; done
  quiet || exit 1
}

# quiet: waits until no merge has run for 3 s (a single look can fall
# between two merges), at most 5 minutes; then the merges a load left
# behind are done, and their CPU counted by whoever waited (with the
# engine's idle work of those 3 s: about 25 ms of CPU).
quiet() {
  local idle=0
  for _ in $(seq 1500); do
    if [ "$(q "SELECT count() FROM system.merges")" = 0 ]; then idle=$((idle + 1)); else idle=0; fi
    [ "$idle" -ge 15 ] && return 0
    sleep 0.2
  done
  echo "bench: background merges still running after 5 minutes" >&2
  return 1
}

# decide_rows: one resolve run decides the N calls of the backlog into
# toolaudit.decisions; its rows are kept in toolaudit.bench_rows (Memory)
# for benchmarks that insert the same decided rows again, and counted in
# $rows.
decide_rows() {
  settle decisions decisions_by_minute
  "$work/resolverd" run --brokers "$KAFKA" --clickhouse "$CH" --http "" --group bench-engine --analysis bench-engine \
    --listing-hold 0 --log-level warn > "$work/run.log" 2>&1 &
  echo $! > "$work/pid"
  "$work/resolverd" report --clickhouse "$CH" --analysis bench-engine --expect "$N" --timeout 20m --poll 100ms > /dev/null
  kill -INT "$(cat "$work/pid")"; wait "$(cat "$work/pid")" 2>/dev/null || true
  q "CREATE TABLE toolaudit.bench_rows ENGINE = Memory AS SELECT * FROM toolaudit.decisions"
  rows=$(q "SELECT count() FROM toolaudit.bench_rows")
}

# profile SINCE ROWS: the engine's CPU since SINCE (PROFILE=1), per stage,
# per row of ROWS.
profile() {
  [ "${PROFILE:-0}" = 1 ] || return 0
  local since=$1 rows=$2 db=${3:-toolaudit} cpu="ProfileEvents['UserTimeMicroseconds'] + ProfileEvents['SystemTimeMicroseconds']"
  q "SYSTEM FLUSH LOGS"
  echo "  engine CPU by stage (us per row of decisions; query_log, query_views_log, part_log):"
  q "SELECT '    ' || rpad(kind, 44) || leftPad(toString(n), 6) || ' x, ' || leftPad(toString(round(us / $rows, 2)), 6) || ' us/row'
     FROM (
       SELECT 'INSERT INTO decisions (views included)' AS kind, count() AS n, sum($cpu) AS us
       FROM system.query_log WHERE event_time_microseconds >= toDateTime64('$since', 6) AND type = 'QueryFinish' AND query_kind = 'Insert' AND has(tables, '${db:-toolaudit}.decisions')
       UNION ALL
       SELECT 'view ' || view_name, count(), sum($cpu)
       FROM system.query_views_log WHERE event_time_microseconds >= toDateTime64('$since', 6) GROUP BY view_name
       UNION ALL
       SELECT 'merges of ' || table, count(), sum($cpu)
       FROM system.part_log WHERE event_time_microseconds >= toDateTime64('$since', 6) AND event_type = 'MergeParts' GROUP BY table
     ) ORDER BY kind FORMAT TSVRaw"
  # The engine's query profiler does not run in the embedded engine (no
  # trace_log rows) and libchdb.so has no symbols for perf: its own timers
  # are what splits an INSERT's time by stage.
  echo "  the INSERTs' timed stages (ProfileEvents *Microseconds, us per row; they overlap):"
  q "SELECT '    ' || rpad(k, 56) || leftPad(toString(round(sum(v) / $rows, 3)), 7)
     FROM system.query_log ARRAY JOIN mapKeys(ProfileEvents) AS k, mapValues(ProfileEvents) AS v
     WHERE event_time_microseconds >= toDateTime64('$since', 6) AND type = 'QueryFinish' AND query_kind = 'Insert'
       AND has(tables, '${db:-toolaudit}.decisions') AND k LIKE '%Microseconds' AND k NOT IN ('RealTimeMicroseconds', 'OSCPUWaitMicroseconds')
     GROUP BY k HAVING sum(v) / $rows >= 0.02 ORDER BY sum(v) DESC LIMIT 20 FORMAT TSVRaw"
  echo "  the merges of decisions, timed stages (us per row):"
  q "SELECT '    ' || rpad(k, 56) || leftPad(toString(round(sum(v) / $rows, 3)), 7)
     FROM system.part_log ARRAY JOIN mapKeys(ProfileEvents) AS k, mapValues(ProfileEvents) AS v
     WHERE event_time_microseconds >= toDateTime64('$since', 6) AND event_type = 'MergeParts' AND table = 'decisions'
       AND (k LIKE '%Microseconds' OR k LIKE '%Milliseconds') AND k NOT IN ('RealTimeMicroseconds', 'OSCPUWaitMicroseconds')
     GROUP BY k HAVING sum(v) / $rows >= 0.02 ORDER BY sum(v) DESC LIMIT 20 FORMAT TSVRaw"
}

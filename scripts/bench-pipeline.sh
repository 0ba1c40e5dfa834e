#!/usr/bin/env bash
# End-to-end throughput, Kafka (embedded kfake) -> resolverd -> ClickHouse
# (the engine beside it), with resolution on, then off (--passthrough), in
# one run on the same backlog. Each run is a fresh consumer group and
# analysis id, so both read the whole backlog; calls/s = calls / (time from
# start until ClickHouse holds them all, FINAL). Passthrough stores each call
# decoded but not resolved: the difference is what resolution costs. Also
# reports the CPU time of resolverd and of the ClickHouse engine during each
# run (the broker, in the `stack` process, is not counted) and resolverd's
# peak RSS. --listing-hold 0: the backlog arrived long before the run, so
# the hold would only add one wait at the start of the resolve run.
# The peer, a third mode in every round: what a user would pick to load
# the calls into ClickHouse without any resolution, ClickHouse's own Kafka
# table engine (librdkafka inside the engine, JSONEachRow, 2 consumers,
# each flushing its own blocks: kafka_thread_per_consumer, the faster and
# steadier setting here; with one flushing thread for both, 3 of 6 runs
# loaded at 37k-40k calls/s instead of 100k, at the same CPU)
# feeding a materialized view into decisions_peer, a table made AS
# decisions (same columns, codecs, order); it stores each call's context,
# its Kafka position and the keyed-hash-free args_hash (SHA-256 of the
# arguments' text), no class. Its CPU is the engine's alone (the broker is
# not counted for any mode), and again with the merges the server ran
# after the run's end (until none ran for 3 s), which a bench that stops
# at its last row would leave out. Each mode's rate is given from its
# start, from its first stored batch on, and from a tenth of the calls
# stored to nine tenths (start-up and the last batches left out); the
# ratios are of the first and of the last. The rate from the first batch
# leans towards the peer, whose consumers parse records for about 2 s
# before their first block shows.
# PROFILE=1 adds, after each run, the engine's CPU per stage (the
# INSERTs, each materialized view, merges) and the INSERTs' own timers.
# PEER_SETTINGS=', kafka_x = y' adds settings to the peer's Kafka table.
# PEER_CONSUMERS=N gives the peer N consumers (default 2, one per core;
# the calls topic has 6 partitions).
# PEER_VIEWS=1 makes the peer write into decisions itself (under its own
# analysis id), so that every materialized view of decisions (the
# rollups) fires for its rows as for resolverd's: what a user of the
# engine's ingestion who wanted the same dashboards would run. The default
# is the issue's comparison, a copy of decisions without the views.
# Usage: [ROUNDS=2] [MODES='resolve passthrough peer'] [PEER=1] [PROFILE=0] [PEER_SETTINGS=] [PEER_CONSUMERS=2] [PEER_VIEWS=0] [RUN_FLAGS='--flag value ...'] scripts/bench-pipeline.sh [CALLS]
# (default 1000000 calls; RUN_FLAGS are added to both modes' resolverd run;
# PEER=0 leaves the peer out)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
. scripts/bench-stack.sh

# Each run starts on an empty decisions (and decisions_by_minute, or
# decisions_peer) and a quiet server; the other rollups keep earlier
# runs' groups (tens of thousands of rows a run, against a million in
# decisions). With earlier runs' rows in decisions, which run paid for
# merging them into larger parts
# depended on the order: a run merged 0.6M to 3.5M rows, and in one
# invocation two resolve runs cost the engine twice the CPU of the other
# two (14.4 and 12.4 us a row against 7.3 and 7.5). And the previous
# run's background merges (its rows are merged for seconds after it ends)
# would count against the next one.

# marks: polls count() FROM toolaudit.decisions every 0.1 s until it
# holds the N calls, and prints the time and the count when the first
# batch was stored, when a tenth of the N calls were and when nine tenths
# were, and the time of the poll that saw them all (the run's end).
# Between the tenth and nine tenths the ingestion runs at its own pace,
# start-up and the last batches left out, for resolverd as for the peer,
# whose consumers parse records for about 2 s before their first block
# shows (so a rate from its first block credits it with work done
# before). The table holds this run's rows alone (settle empties it), so
# the count is the one the engine answers from its parts' metadata, as
# the peer's loop counts its table: a count with a WHERE on the analysis
# and `report --expect` polling beside it cost the engine up to 0.4 µs a
# call more than the peer's one loop (docs/performance.md, "the polls").
# `report --expect` runs once marks has seen every call, to confirm the
# count with FINAL and the rollups; the run's time and CPU end at that
# poll, as the peer's end at its own.
marks() {
  local n f="" n10="" t90="" deadline=$(($(date +%s) + 1200)) tenth=$((N / 10 > 0 ? N / 10 : 1))
  while :; do
    n=$(q "SELECT count() FROM toolaudit.decisions")
    [ -z "$f" ] && [ "$n" != 0 ] && f="$(date +%s.%N) $n"
    [ -z "$n10" ] && [ "$n" -ge "$tenth" ] && n10="$(date +%s.%N) $n"
    [ -z "$t90" ] && [ "$n" -ge $((N * 9 / 10)) ] && t90="$(date +%s.%N) $n"
    [ "$n" -ge "$N" ] && { echo "$f $n10 $t90 $(date +%s.%N)"; return; }
    kill -0 "$(cat "$work/pid")" 2>/dev/null || { echo "bench: resolverd exited with $n of $N calls stored (its log: $work/$name.log)" >&2; cat "$work/$name.log" >&2; exit 1; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "bench: only $n of $N calls stored after 20 minutes" >&2; exit 1; }
    sleep 0.1
  done
}

# mid T10 N10 T90 N90: the rate between the two marks; 0 when both saw
# the same count (a backlog stored in one or two batches).
mid() { python3 -c "import sys; t=float(sys.argv[3])-float(sys.argv[1]); print((int(sys.argv[4])-int(sys.argv[2]))/t if t > 0 else 0)" "$@"; }

run() { # name, extra flags...
  local name=$1; shift
  settle decisions decisions_by_minute
  local e0; e0=$(cpu "$engine")
  local since; since=$(q "SELECT now64(6)")
  "$work/resolverd" run --brokers "$KAFKA" --clickhouse "$CH" --http "" \
    --group "bench-$name" --analysis "bench-$name" --listing-hold 0 --log-level warn ${RUN_FLAGS:-} "$@" > "$work/$name.log" 2>&1 &
  echo $! > "$work/pid"
  local start=$(date +%s.%N)
  marks > "$work/first"
  local pid=$(cat "$work/pid")
  local rcpu; rcpu=$(cpu "$pid")
  local e1; e1=$(cpu "$engine")
  local f nf t10 n10 t90 n90 end; read -r f nf t10 n10 t90 n90 end < "$work/first"
  "$work/resolverd" report --clickhouse "$CH" --analysis "bench-$name" --expect "$N" --timeout 20m --poll 100ms > "$work/$name.report"
  middle=$(mid "$t10" "$n10" "$t90" "$n90")
  local rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  quiet
  local e2; e2=$(cpu "$engine")
  python3 -c "import sys; n,s,e,r,c,f,nf,m=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[5])/100,int(sys.argv[6])/100,float(sys.argv[8]),int(sys.argv[9]),int(sys.argv[10])/100; print('%-12s %8d calls in %6.2f s = %8.0f calls/s; from its first stored batch (%.1f s after the start) %8.0f calls/s; CPU: resolverd %5.1f s (%4.1f us/call), ClickHouse %5.1f s (%4.1f us/call), %4.1f us/call with the merges that followed; resolverd peak RSS %d MB; from 10%% to 90%% stored %8.0f calls/s' % (sys.argv[4], n, e-s, n/(e-s), f-s, (n-nf)/(e-f), r, r/n*1e6, c, c/n*1e6, (c+m)/n*1e6, int(sys.argv[7])//1024, float(sys.argv[11])))" "$N" "$start" "$end" "$name" "$rcpu" "$((e1-e0))" "$rss" "$f" "$nf" "$((e2-e1))" "$middle"
  rate=$(python3 -c "import sys; print(int(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])))" "$N" "$start" "$end")
  profile "$since" "$N"
}

# peer NAME: the engine's own Kafka ingestion of the whole backlog into
# decisions_peer, timed until the table holds every call that parses as
# JSONEachRow (the backlog's few unparseable lines are skipped: the end is
# the last time the count grew, once it has not grown for 20 s). Blocks
# are flushed at 65,536 rows or after 1 s (kafka_flush_interval_ms), as
# resolverd's batches are at 100,000 rows, 64 MiB or 1 s.
peer() {
  local name=$1
  q "DROP VIEW IF EXISTS toolaudit.calls_peer_mv" ; q "DROP TABLE IF EXISTS toolaudit.calls_peer_queue"
  local table=decisions_peer
  if [ "${PEER_VIEWS:-0}" = 1 ]; then
    table=decisions
    settle decisions decisions_by_minute
  else
    q "CREATE TABLE IF NOT EXISTS toolaudit.decisions_peer AS toolaudit.decisions"
    settle decisions_peer
  fi
  q "CREATE TABLE toolaudit.calls_peer_queue (event_id String, emitted_at String, registry String,
       agent_id String, session_id String, model String, provider String, surface String,
       tool String, server String, seen_digest String, arguments String)
     ENGINE = Kafka SETTINGS kafka_broker_list = '$KAFKA', kafka_topic_list = 'tool-calls',
       kafka_group_name = 'bench-$name', kafka_format = 'JSONEachRow', kafka_num_consumers = ${PEER_CONSUMERS:-2},
       kafka_thread_per_consumer = 1, kafka_flush_interval_ms = 1000, kafka_skip_broken_messages = 1000000,
       input_format_skip_unknown_fields = 1${PEER_SETTINGS:-}"
  local e0; e0=$(cpu "$engine")
  local since; since=$(q "SELECT now64(6)")
  local start=$(date +%s.%N)
  q "CREATE MATERIALIZED VIEW toolaudit.calls_peer_mv TO toolaudit.$table AS
     SELECT event_id, event_id AS call_key, 'bench-$name' AS analysis_id, registry, agent_id, session_id,
       model, provider, surface, tool, server, seen_digest,
       parseDateTime64BestEffortOrZero(emitted_at, 3, 'UTC') AS emitted_at, now64(3) AS decided_at,
       concat('sha256:', lower(hex(SHA256(arguments)))) AS args_hash,
       _topic AS topic, toInt32(_partition) AS partition, toInt64(_offset) AS offset
     FROM toolaudit.calls_peer_queue"
  local n=0 last=-1 same=0 end first="" nfirst=0 t10="" n10=0 t90="" n90=0
  while :; do
    n=$(q "SELECT count() FROM toolaudit.$table")
    if [ -z "$first" ] && [ "$n" != 0 ]; then first=$(date +%s.%N); nfirst=$n; fi
    if [ -z "$t10" ] && [ "$n" -ge $((N / 10 > 0 ? N / 10 : 1)) ]; then t10=$(date +%s.%N); n10=$n; fi
    if [ -z "$t90" ] && [ "$n" -ge $((N * 9 / 10)) ]; then t90=$(date +%s.%N); n90=$n; fi
    if [ "$n" = "$last" ] && [ "$n" != 0 ]; then same=$((same + 1)); else same=0; end=$(date +%s.%N); fi
    [ "$n" -ge "$N" ] && end=$(date +%s.%N) && break
    [ "$same" -ge 200 ] && break # unchanged for 20 s: every parseable call is in (the consumers take seconds to join)
    last=$n; sleep 0.1
  done
  local e1; e1=$(cpu "$engine")
  q "DROP VIEW toolaudit.calls_peer_mv"; q "DROP TABLE toolaudit.calls_peer_queue"
  quiet
  local e2; e2=$(cpu "$engine")
  peermiddle=0
  [ -n "$t90" ] && peermiddle=$(mid "$t10" "$n10" "$t90" "$n90")
  python3 -c "import sys; n,s,e,c,f,nf,m=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[5])/100,float(sys.argv[6]),int(sys.argv[7]),int(sys.argv[8])/100; print('%-12s %8d calls in %6.2f s = %8.0f calls/s; from its first stored block (%.1f s after the start) %8.0f calls/s; CPU: ClickHouse %5.1f s (%4.1f us/call), its own Kafka consumers included, %4.1f us/call with the merges that followed; from 10%% to 90%% stored %8.0f calls/s' % (sys.argv[4], n, e-s, n/(e-s), f-s, (n-nf)/(e-f), c, c/n*1e6, (c+m)/n*1e6, float(sys.argv[9])))" "$n" "$start" "$end" "$name" "$((e1-e0))" "$first" "$nfirst" "$((e2-e1))" "$peermiddle"
  peertotal=$(python3 -c "import sys; print(int(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])))" "$n" "$start" "$end")
  profile "$since" "$n"
}

# Alternating rounds: the machine's speed drifts within minutes, so one
# run of each mode says little about the ratio. Even rounds run
# passthrough first: a fixed order would lean every round's ratio the
# same way.
# MODES picks the modes (default all three; PEER=0 drops the peer).
modes=" ${MODES:-resolve passthrough peer} "
[ "${PEER:-1}" = 1 ] || modes=${modes/ peer / }
on() { [[ $modes == *" $1 "* ]]; }
ratio() { python3 -c "import sys; n, d = float(sys.argv[1]), float(sys.argv[2]); print('%.2f' % (n / d) if n and d else 'n/a')" "$1" "$2"; }
ratios="" peers="" steadies=""
for round in $(seq "${ROUNDS:-2}"); do
  if [ $((round % 2)) = 1 ]; then
    if on resolve; then run "resolve-$round"; r=$rate rs=$middle; fi
    if on passthrough; then run "passthrough-$round" --passthrough; p=$rate; fi
    if on peer; then peer "peer-$round"; fi
  else
    if on peer; then peer "peer-$round"; fi
    if on passthrough; then run "passthrough-$round" --passthrough; p=$rate; fi
    if on resolve; then run "resolve-$round"; r=$rate rs=$middle; fi
  fi
  if on resolve && on passthrough; then ratios="$ratios $(ratio "$r" "$p")"; fi
  if on resolve && on peer; then
    peers="$peers $(ratio "$r" "$peertotal")"
    steadies="$steadies $(ratio "$rs" "$peermiddle")"
  fi
done
[ -n "$ratios" ] && echo "resolve / passthrough, per round:$ratios"
[ -n "$peers" ] && echo "resolve / the engine's own Kafka ingestion (peer), per round, start to end:$peers; from 10% to 90% stored:$steadies"
exit 0

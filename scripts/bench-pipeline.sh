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
# at its last row would leave out. Each mode's rate is given from its start and
# from its first stored batch on (start-up left out), and the ratios of
# both.
# PROFILE=1 adds, after each run, the engine's CPU per stage (the
# INSERTs, each materialized view, merges) and the INSERTs' own timers.
# PEER_SETTINGS=', kafka_x = y' adds settings to the peer's Kafka table.
# PEER_CONSUMERS=N gives the peer N consumers (default 2, one per core;
# the calls topic has 6 partitions).
# Usage: [ROUNDS=2] [MODES='resolve passthrough peer'] [PEER=1] [PROFILE=0] [PEER_SETTINGS=] [PEER_CONSUMERS=2] [RUN_FLAGS='--flag value ...'] scripts/bench-pipeline.sh [CALLS]
# (default 1000000 calls; RUN_FLAGS are added to both modes' resolverd run;
# PEER=0 leaves the peer out)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
. scripts/bench-stack.sh

# Each run starts on empty tables and a quiet server. With earlier runs'
# rows in place, which run paid for merging them into larger parts
# depended on the order: a run merged 0.6M to 3.5M rows, and in one
# invocation two resolve runs cost the engine twice the CPU of the other
# two (14.4 and 12.4 us a row against 7.3 and 7.5). And the previous
# run's background merges (its rows are merged for seconds after it ends)
# would count against the next one.

# first WHERE: polls count() FROM WHERE every 0.1 s until it is not 0 and
# prints the time and the count then: when the first batch was stored.
first() {
  local n
  while :; do
    n=$(q "SELECT count() FROM $1")
    [ "$n" != 0 ] && { echo "$(date +%s.%N) $n"; return; }
    sleep 0.1
  done
}

run() { # name, extra flags...
  local name=$1; shift
  settle decisions decisions_by_minute
  local e0; e0=$(cpu "$engine")
  local since; since=$(q "SELECT now64(6)")
  "$work/resolverd" run --brokers "$KAFKA" --clickhouse "$CH" --http "" \
    --group "bench-$name" --analysis "bench-$name" --listing-hold 0 --log-level warn ${RUN_FLAGS:-} "$@" > "$work/$name.log" 2>&1 &
  echo $! > "$work/pid"
  local start=$(date +%s.%N)
  first "toolaudit.decisions WHERE analysis_id = 'bench-$name'" > "$work/first" &
  local firstpid=$!
  "$work/resolverd" report --clickhouse "$CH" --analysis "bench-$name" --expect "$N" --timeout 20m --poll 100ms > "$work/$name.report"
  local end=$(date +%s.%N)
  wait "$firstpid"
  local f nf; read -r f nf < "$work/first"
  local pid=$(cat "$work/pid")
  local rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
  local rcpu; rcpu=$(cpu "$pid")
  local e1; e1=$(cpu "$engine")
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  quiet
  local e2; e2=$(cpu "$engine")
  python3 -c "import sys; n,s,e,r,c,f,nf,m=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[5])/100,int(sys.argv[6])/100,float(sys.argv[8]),int(sys.argv[9]),int(sys.argv[10])/100; print('%-12s %8d calls in %6.2f s = %8.0f calls/s; from its first stored batch (%.1f s after the start) %8.0f calls/s; CPU: resolverd %5.1f s (%4.1f us/call), ClickHouse %5.1f s (%4.1f us/call), %4.1f us/call with the merges that followed; resolverd peak RSS %d MB' % (sys.argv[4], n, e-s, n/(e-s), f-s, (n-nf)/(e-f), r, r/n*1e6, c, c/n*1e6, (c+m)/n*1e6, int(sys.argv[7])//1024))" "$N" "$start" "$end" "$name" "$rcpu" "$((e1-e0))" "$rss" "$f" "$nf" "$((e2-e1))"
  rate=$(python3 -c "import sys; print(int(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])))" "$N" "$start" "$end")
  steady=$(python3 -c "import sys; print((int(sys.argv[1])-int(sys.argv[4]))/(float(sys.argv[3])-float(sys.argv[2])))" "$N" "$f" "$end" "$nf")
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
  q "CREATE TABLE IF NOT EXISTS toolaudit.decisions_peer AS toolaudit.decisions"
  settle decisions_peer
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
  q "CREATE MATERIALIZED VIEW toolaudit.calls_peer_mv TO toolaudit.decisions_peer AS
     SELECT event_id, event_id AS call_key, 'bench-$name' AS analysis_id, registry, agent_id, session_id,
       model, provider, surface, tool, server, seen_digest,
       parseDateTime64BestEffortOrZero(emitted_at, 3, 'UTC') AS emitted_at, now64(3) AS decided_at,
       concat('sha256:', lower(hex(SHA256(arguments)))) AS args_hash,
       _topic AS topic, toInt32(_partition) AS partition, toInt64(_offset) AS offset
     FROM toolaudit.calls_peer_queue"
  local n=0 last=-1 same=0 end first="" nfirst=0
  while :; do
    n=$(q "SELECT count() FROM toolaudit.decisions_peer")
    if [ -z "$first" ] && [ "$n" != 0 ]; then first=$(date +%s.%N); nfirst=$n; fi
    if [ "$n" = "$last" ] && [ "$n" != 0 ]; then same=$((same + 1)); else same=0; end=$(date +%s.%N); fi
    [ "$n" -ge "$N" ] && end=$(date +%s.%N) && break
    [ "$same" -ge 200 ] && break # unchanged for 20 s: every parseable call is in (the consumers take seconds to join)
    last=$n; sleep 0.1
  done
  local e1; e1=$(cpu "$engine")
  q "DROP VIEW toolaudit.calls_peer_mv"; q "DROP TABLE toolaudit.calls_peer_queue"
  quiet
  local e2; e2=$(cpu "$engine")
  python3 -c "import sys; n,s,e,c,f,nf,m=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[5])/100,float(sys.argv[6]),int(sys.argv[7]),int(sys.argv[8])/100; print('%-12s %8d calls in %6.2f s = %8.0f calls/s; from its first stored block (%.1f s after the start) %8.0f calls/s; CPU: ClickHouse %5.1f s (%4.1f us/call), its own Kafka consumers included, %4.1f us/call with the merges that followed' % (sys.argv[4], n, e-s, n/(e-s), f-s, (n-nf)/(e-f), c, c/n*1e6, (c+m)/n*1e6))" "$n" "$start" "$end" "$name" "$((e1-e0))" "$first" "$nfirst" "$((e2-e1))"
  # Two rates, as for resolverd: from the start, and from the first
  # stored block on (the consumers take about 2 s to join their group and
  # receive records, resolverd about 1 s to apply the registry's listings
  # before its first call), what a running ingestion sustains.
  peerrate=$(python3 -c "import sys; print((int(sys.argv[1])-int(sys.argv[4]))/(float(sys.argv[3])-float(sys.argv[2])))" "$n" "$first" "$end" "$nfirst")
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
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1])/float(sys.argv[2])))" "$1" "$2"; }
ratios="" peers="" steadies=""
for round in $(seq "${ROUNDS:-2}"); do
  if [ $((round % 2)) = 1 ]; then
    if on resolve; then run "resolve-$round"; r=$rate rs=$steady; fi
    if on passthrough; then run "passthrough-$round" --passthrough; p=$rate; fi
    if on peer; then peer "peer-$round"; fi
  else
    if on peer; then peer "peer-$round"; fi
    if on passthrough; then run "passthrough-$round" --passthrough; p=$rate; fi
    if on resolve; then run "resolve-$round"; r=$rate rs=$steady; fi
  fi
  if on resolve && on passthrough; then ratios="$ratios $(ratio "$r" "$p")"; fi
  if on resolve && on peer; then
    peers="$peers $(ratio "$r" "$peertotal")"
    steadies="$steadies $(ratio "$rs" "$peerrate")"
  fi
done
[ -n "$ratios" ] && echo "resolve / passthrough, per round:$ratios"
[ -n "$peers" ] && echo "resolve / the engine's own Kafka ingestion (peer), per round, start to end:$peers; from the first stored block (leans towards the peer, whose consumers parse for about 2 s before their first block shows):$steadies"
exit 0

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
# Usage: [ROUNDS=2] [RUN_FLAGS='--flag value ...'] scripts/bench-pipeline.sh [CALLS]
# (default 1000000 calls; RUN_FLAGS are added to both modes' resolverd run)
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

run() { # name, extra flags...
  local name=$1; shift
  settle decisions decisions_by_minute
  local e0; e0=$(cpu "$engine")
  "$work/resolverd" run --brokers "$KAFKA" --clickhouse "$CH" --http "" \
    --group "bench-$name" --analysis "bench-$name" --listing-hold 0 --log-level warn ${RUN_FLAGS:-} "$@" > "$work/$name.log" 2>&1 &
  echo $! > "$work/pid"
  local start=$(date +%s.%N)
  "$work/resolverd" report --clickhouse "$CH" --analysis "bench-$name" --expect "$N" --timeout 20m --poll 100ms > "$work/$name.report"
  local end=$(date +%s.%N)
  local pid=$(cat "$work/pid")
  local rss=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
  local rcpu; rcpu=$(cpu "$pid")
  local e1; e1=$(cpu "$engine")
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  python3 -c "import sys; n,s,e,r,c=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[5])/100,int(sys.argv[6])/100; print('%-12s %8d calls in %6.2f s = %8.0f calls/s; CPU: resolverd %5.1f s (%4.1f us/call), ClickHouse %5.1f s (%4.1f us/call); resolverd peak RSS %d MB' % (sys.argv[4], n, e-s, n/(e-s), r, r/n*1e6, c, c/n*1e6, int(sys.argv[7])//1024))" "$N" "$start" "$end" "$name" "$rcpu" "$((e1-e0))" "$rss"
  rate=$(python3 -c "import sys; print(int(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])))" "$N" "$start" "$end")
}

# Alternating rounds: the machine's speed drifts within minutes, so one
# run of each mode says little about the ratio. Even rounds run
# passthrough first: a fixed order would lean every round's ratio the
# same way.
ratios=""
for round in $(seq "${ROUNDS:-2}"); do
  if [ $((round % 2)) = 1 ]; then
    run "resolve-$round"; r=$rate
    run "passthrough-$round" --passthrough; p=$rate
  else
    run "passthrough-$round" --passthrough; p=$rate
    run "resolve-$round"; r=$rate
  fi
  ratios="$ratios $(python3 -c "import sys; print('%.2f' % (float(sys.argv[1])/float(sys.argv[2])))" "$r" "$p")"
done
echo "resolve / passthrough, per round:$ratios"

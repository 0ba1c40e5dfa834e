#!/usr/bin/env bash
# Times `resolverd check` against `jq -c .` re-printing the same calls
# file: the corpus calls (sample + BFCL) replicated to about 300k lines.
# Usage: scripts/bench-check.sh [LINES]   (needs jq; uses hyperfine if present)
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-300000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/resolverd" ./cmd/resolverd
cat testdata/corpus/sample/listings.jsonl testdata/corpus/bfcl/listings.jsonl > "$dir/listings.jsonl"
one=$(cat testdata/corpus/sample/calls.jsonl testdata/corpus/bfcl/calls.jsonl | wc -l)
for _ in $(seq 1 $(( (lines + one - 1) / one ))); do
  cat testdata/corpus/sample/calls.jsonl testdata/corpus/bfcl/calls.jsonl
done > "$dir/all.jsonl"
head -n "$lines" "$dir/all.jsonl" > "$dir/calls.jsonl"
rm "$dir/all.jsonl"
echo "calls: $(wc -l < "$dir/calls.jsonl") lines, $(du -h "$dir/calls.jsonl" | cut -f1)"
check="$dir/resolverd check --quiet --listings $dir/listings.jsonl --calls $dir/calls.jsonl > /dev/null"
jqc="jq -c . $dir/calls.jsonl > /dev/null"
if command -v hyperfine > /dev/null; then
  hyperfine --warmup 1 --runs 5 -N "sh -c '$check'" "sh -c '$jqc'"
else
  for i in 1 2 3; do
    /usr/bin/time -f "resolverd check: %e s, %M KiB max RSS" sh -c "$check"
    /usr/bin/time -f "jq -c .:         %e s, %M KiB max RSS" sh -c "$jqc"
  done
fi

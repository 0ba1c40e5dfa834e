#!/usr/bin/env bash
# Builds the OpenTelemetry Collector of the OpenTelemetry end-to-end test
# (testdata/otelcol: the Collector's own OTLP receiver, batch processor
# and contrib Kafka exporter, v0.165, a Go module of its own) into
#
#   OTELCOL_DIR  (default: ${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/otelcol)
#
# and prints the binary's path. cmd/resolverd's TestInstrumentations runs
# it (TOOLAUDIT_OTELCOL, else that path) and skips without it unless
# TOOLAUDIT_REQUIRE=1. Idempotent: a second run is a cached go build.
set -euo pipefail
cd "$(dirname "$0")/../testdata/otelcol"
DIR="${OTELCOL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/otelcol}"
mkdir -p "$DIR"
CGO_ENABLED=0 go build -trimpath -o "$DIR/otelcol-toolaudit" .
echo "$DIR/otelcol-toolaudit"

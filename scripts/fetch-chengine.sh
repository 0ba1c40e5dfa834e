#!/usr/bin/env bash
# Installs the ClickHouse engine (libchdb.so, npm package below) into the
# chengine cache dir and prints the library's path. Idempotent: a second run
# is an npm no-op (under a second). Package chengine finds the library there.
#
#   CHENGINE_DIR  cache dir (default: ${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/chengine)
#
# Keep PKG in step with chengine.Package (chengine/find.go).
set -euo pipefail

PKG='@chdb/lib-linux-x64-gnu@26.7.3-stable.1'
DIR="${CHENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/chengine}"
LIB="$DIR/node_modules/@chdb/lib-linux-x64-gnu/libchdb.so"

if ! command -v npm >/dev/null 2>&1; then
	echo "fetch-chengine: npm not found; install it (apt-get install -y npm)" >&2
	exit 1
fi
mkdir -p "$DIR"
# --cache inside DIR keeps the 180 MB tarball with the install, so a repeat
# install (or a wiped node_modules) needs no network; output goes to stderr so
# stdout is only the path.
npm install --no-save --no-audit --no-fund --cache "$DIR/.npm" --prefix "$DIR" "$PKG" >&2
if [[ ! -f "$LIB" ]]; then
	echo "fetch-chengine: npm finished but $LIB is missing" >&2
	exit 1
fi
echo "$LIB"

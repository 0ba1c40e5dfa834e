#!/usr/bin/env bash
# Installs the ClickHouse engine (libchdb.so, npm package below) into the
# chengine cache dir and prints the library's path. Package chengine finds
# the library there. The download is about 170 MB; installed, the package
# takes about 545 MB (the library alone 540 MB).
#
#   CHENGINE_DIR  cache dir (default: ${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/chengine)
#
# Idempotent: when the pinned version is installed it prints the path and
# runs nothing (no npm, no network). npm's tarball cache is a temporary
# dir, removed afterwards, so the 170 MB tarball is not kept beside the
# unpacked package: a re-install downloads again, which is rare (a new
# pinned version), and the disk saved is every machine's.
#
# Keep PKG in step with chengine.Package (chengine/find.go).
set -euo pipefail

NAME='@chdb/lib-linux-x64-gnu'
VERSION='26.7.3-stable.1'
PKG="$NAME@$VERSION"
DIR="${CHENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/chengine}"
LIB="$DIR/node_modules/$NAME/libchdb.so"

installed() {
	[[ -f "$LIB" ]] && grep -q "\"version\": *\"$VERSION\"" "$DIR/node_modules/$NAME/package.json" 2>/dev/null
}

# Earlier versions of this script (and of chengine.Fetch) kept npm's cache
# in DIR/.npm: 170 MB nothing reads.
rm -rf "$DIR/.npm"
if installed; then
	echo "$LIB"
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "fetch-chengine: npm not found; install it (apt-get install -y npm)" >&2
	exit 1
fi
mkdir -p "$DIR"
cache=$(mktemp -d "$DIR/.npm-cache.XXXXXX")
trap 'rm -rf "$cache"' EXIT
# Output goes to stderr so that stdout is only the path.
npm install --no-save --no-audit --no-fund --cache "$cache" --prefix "$DIR" "$PKG" >&2
if ! installed; then
	echo "fetch-chengine: npm finished but $LIB (version $VERSION) is missing" >&2
	exit 1
fi
echo "$LIB"

#!/usr/bin/env bash
# Makes node (>= 20) and npm available for the tests and prints the
# directory of their binaries (put it first on PATH). The MCP reference
# servers the gateway's end-to-end tests run need node 20 or later (their
# dependency @hono/node-server says so); Debian 12's nodejs is 18. When
# the node on PATH is recent enough this runs nothing; otherwise it
# installs the official build of the pinned version below into
#
#   NODE_DIR  (default: ${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/node)
#
# checking the tarball against the release's SHASUMS256.txt (both over
# HTTPS from nodejs.org). Idempotent.
set -euo pipefail

VERSION='v20.20.2'
MIN_MAJOR=20
DIR="${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolaudit/node}"

major() { "$1" --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/'; }

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
	[[ "$(major node)" -ge "$MIN_MAJOR" ]]; then
	dirname "$(command -v node)"
	exit 0
fi
case "$(uname -m)" in
x86_64) arch=x64 ;;
aarch64 | arm64) arch=arm64 ;;
*)
	echo "install-node: no official node build for $(uname -m)" >&2
	exit 1
	;;
esac
name="node-$VERSION-linux-$arch"
bin="$DIR/$name/bin"
if [[ -x "$bin/node" && "$("$bin/node" --version)" == "$VERSION" ]]; then
	echo "$bin"
	exit 0
fi
for tool in curl xz sha256sum; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "install-node: $tool not found (Debian: apt-get install -y curl xz-utils coreutils ca-certificates)" >&2
		exit 1
	fi
done
mkdir -p "$DIR"
tmp=$(mktemp -d "$DIR/.download.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
url="https://nodejs.org/dist/$VERSION"
# Output goes to stderr so that stdout is only the path.
curl -fsSL --retry 3 -o "$tmp/SHASUMS256.txt" "$url/SHASUMS256.txt" >&2
curl -fsSL --retry 3 -o "$tmp/$name.tar.xz" "$url/$name.tar.xz" >&2
(cd "$tmp" && grep " $name.tar.xz\$" SHASUMS256.txt | sha256sum -c --quiet -) >&2
tar -xJf "$tmp/$name.tar.xz" -C "$tmp"
rm -rf "${DIR:?}/$name"
mv "$tmp/$name" "$DIR/$name"
if [[ "$("$bin/node" --version)" != "$VERSION" ]]; then
	echo "install-node: $bin/node is not $VERSION" >&2
	exit 1
fi
echo "$bin"

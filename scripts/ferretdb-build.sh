#!/usr/bin/env bash
# Builds FerretDB v1 (MongoDB wire protocol over SQLite) once and caches the binary in
# .cache/ferretdb/ (git-ignored). `go install …@v1.24.2` builds a binary that panics at start
# because build/version/version.txt is generated at release time, so we build from a writable
# copy of the module with that file written. See ../shared/services.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${FERRETDB_VERSION:-v1.24.2}"
OUT_DIR="$ROOT/.cache/ferretdb"
BIN="$OUT_DIR/ferretdb-$VERSION"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "ferretdb-build: the Go toolchain is missing. Install Go >= 1.24 (https://go.dev/dl or 'apt-get install golang-go'), or set MONGODB_URI to a MongoDB you run." >&2
  exit 1
fi
mkdir -p "$OUT_DIR"
echo "ferretdb-build: building FerretDB $VERSION (a cold build takes a few minutes)…" >&2
export GOFLAGS=-mod=mod
MOD_DIR="$(go mod download -json "github.com/FerretDB/FerretDB@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$MOD_DIR" || ! -d "$MOD_DIR" ]]; then
  echo "ferretdb-build: 'go mod download github.com/FerretDB/FerretDB@$VERSION' failed (is the Go module proxy reachable?)" >&2
  exit 1
fi
SRC="$(mktemp -d "$OUT_DIR/src.XXXXXX")"
trap 'rm -rf "$SRC"' EXIT
cp -r "$MOD_DIR/." "$SRC/"
chmod -R u+w "$SRC"
echo "$VERSION" > "$SRC/build/version/version.txt"
build() { (cd "$SRC" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$BIN.tmp" ./cmd/ferretdb); }
if ! GOTOOLCHAIN=local build; then
  echo "ferretdb-build: local Go failed; retrying with the release's own toolchain go1.24.3" >&2
  GOTOOLCHAIN=go1.24.3 build
fi
mv "$BIN.tmp" "$BIN"
echo "$BIN"

#!/usr/bin/env bash
# Builds the local MongoDB stand-in once and caches it in .cache/store/<key>/ (git-ignored):
# FerretDB v2 (MongoDB wire protocol) on PostgreSQL 15 with Microsoft's DocumentDB extension.
#
#   <key>/root/     Debian's PostgreSQL 15 and the libraries the extensions need, unpacked with
#                   `apt-get download` + `dpkg -x` (nothing is installed on the machine), plus
#                   pgvector, pg_cron and documentdb built into it
#   <key>/ferretdb  FerretDB, built from the Go module proxy
#
# The C sources come from $STORE_VENDOR_DIR (default ../shared/vendor next to the project) when
# present, else from their public repositories at the pinned commits; either way the archives must
# match scripts/store-sources.sha256. Prints the cache directory as its last line. The key names
# every version (and RECIPE, bumped when the recipe changes), so a new pin builds a new directory.
# The build happens in a temporary directory renamed into place at the end: an interrupted build
# is never taken for a finished one. One build at a time per cache (flock). Runs without a
# terminal (CI=true, no stdin); what it cannot do alone, it names and stops.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

PG_MAJOR=15
FERRETDB_VERSION=v2.5.0
DOCUMENTDB_TAG=v0.106.0-ferretdb-2.5.0
DOCUMENTDB_COMMIT=beb9d25d9845477c85559d3293cd1f929cdf2b9c
PG_CRON_TAG=v1.6.3
PG_CRON_COMMIT=9d0576c64edd90fb3d8ac30763296a8106315638
PGVECTOR_TAG=v0.8.0
PGVECTOR_COMMIT=2627c5ff775ae6d7aef0c430121ccf857842d2f2
RECIPE=1
KEY="pg$PG_MAJOR-documentdb-$DOCUMENTDB_TAG-pgcron-$PG_CRON_TAG-pgvector-$PGVECTOR_TAG-ferretdb-$FERRETDB_VERSION-r$RECIPE"

CACHE="$ROOT/.cache/store"
OUT="$CACHE/$KEY"
VENDOR="${STORE_VENDOR_DIR:-$ROOT/../shared/vendor}"
SUMS="$ROOT/scripts/store-sources.sha256"

# Debian packages unpacked into the private root: the server and its headers, and what the
# documentdb extension links against or CASCADE-creates (PostGIS, RUM).
DEBS=(postgresql-$PG_MAJOR postgresql-client-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpq-dev libpq5
  postgresql-$PG_MAJOR-postgis-3 postgresql-$PG_MAJOR-postgis-3-scripts postgresql-$PG_MAJOR-rum
  libbson-dev libbson-1.0-0 libpcre2-dev libintelrdfpmath-dev libkrb5-dev krb5-multidev
  libgeos-c1v5 libgeos3.11.1 libproj25 proj-data libprotobuf-c1)

say() { echo "store-build: $*" >&2; }
die() { say "error: $*"; exit 1; }

if [[ -x "$OUT/ferretdb" && -x "$OUT/root/usr/lib/postgresql/$PG_MAJOR/bin/postgres" ]]; then
  echo "$OUT"
  exit 0
fi

need() { command -v "$1" >/dev/null 2>&1 || die "$1 is missing: $2"; }
need apt-get "the stand-in is built from Debian's packages (Debian 12 'bookworm'); on another system set MONGODB_URI to a MongoDB you run."
need dpkg "the stand-in is built from Debian's packages; on another system set MONGODB_URI to a MongoDB you run."
need go "install Go >= 1.24 (https://go.dev/dl or 'apt-get install golang-go') to build FerretDB, or set MONGODB_URI to a MongoDB you run."
need make "run 'apt-get install build-essential' (make and a C compiler build the PostgreSQL extensions)."
need gcc "run 'apt-get install build-essential' (make and a C compiler build the PostgreSQL extensions)."
need sha256sum "coreutils' sha256sum checks the source archives."
need flock "util-linux's flock keeps two builds from running at once."
[[ -f "$SUMS" ]] || die "$SUMS is missing (the sums the source archives must match)."

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  say "another build of the store is running; waiting for it…"
  flock 9
fi
# The build we waited for may have made it.
if [[ -x "$OUT/ferretdb" && -x "$OUT/root/usr/lib/postgresql/$PG_MAJOR/bin/postgres" ]]; then
  echo "$OUT"
  exit 0
fi

# Holding the lock, no other build runs: what a killed one left behind can go.
rm -rf "$CACHE"/.build-*
started=$SECONDS
TMP="$(mktemp -d "$CACHE/.build-$KEY.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
R="$TMP/root"
mkdir -p "$R" "$TMP/debs" "$TMP/src"
# documentdb names its build after the git repository it is built in; .cache lies inside the
# project's, whose commit means nothing to it.
export GIT_CEILING_DIRECTORIES="$TMP"

say "building FerretDB $FERRETDB_VERSION on PostgreSQL $PG_MAJOR + DocumentDB $DOCUMENTDB_TAG into $OUT (a cold build takes several minutes)…"

# ---- 1. Debian packages, unpacked ---------------------------------------------------------
say "downloading ${#DEBS[@]} Debian packages…"
download_debs() { (cd "$TMP/debs" && apt-get download -q "${DEBS[@]}" >/dev/null 2>"$TMP/apt.log"); }
if ! download_debs; then
  say "apt-get download failed ($(tail -n 1 "$TMP/apt.log")); refreshing the package lists first"
  if [[ "$(id -u)" == 0 ]]; then
    apt-get update -qq >/dev/null 2>"$TMP/apt.log" || die "apt-get update failed: $(tail -n 3 "$TMP/apt.log")"
  else
    die "apt-get download failed: $(tail -n 3 "$TMP/apt.log"). Run 'sudo apt-get update', then again."
  fi
  download_debs || die "apt-get download failed: $(tail -n 3 "$TMP/apt.log")"
fi
for deb in "$TMP"/debs/*.deb; do dpkg -x "$deb" "$R"; done
# What Debian's install scripts would have done: the unversioned PostGIS control file, and a
# pkg-config file for Intel's decimal library, for which Debian ships none.
ln -sf postgis-3.control "$R/usr/share/postgresql/$PG_MAJOR/extension/postgis.control"
LIBDIR="$R/usr/lib/x86_64-linux-gnu"
[[ -d "$LIBDIR" ]] || die "this recipe is for x86_64 Debian ($LIBDIR is missing after unpacking)."
cat >"$LIBDIR/pkgconfig/intelmathlib.pc" <<'EOF'
prefix=/usr
libdir=${prefix}/lib/x86_64-linux-gnu
includedir=${prefix}/include
Name: intelmathlib
Description: Intel decimal floating-point math library
Version: 2.0
Libs: -L${libdir} -lbidgcc000
Cflags: -I${includedir}
EOF

# ---- 2. the extensions' sources, checked ----------------------------------------------------
# fetch_source NAME TAG COMMIT URL: NAME-TAG.tar.gz into $TMP/src, from the vendor directory or
# made with `git archive` of the pinned commit (how the vendored archives were made), then checked.
fetch_source() {
  local name="$1" tag="$2" commit="$3" url="$4" file="$1-$2.tar.gz"
  if [[ -f "$VENDOR/$file" ]]; then
    cp "$VENDOR/$file" "$TMP/src/$file"
  else
    need git "git fetches $name $tag from $url (no $VENDOR/$file)."
    say "$VENDOR/$file is absent: fetching $name $tag from $url"
    git clone -q --depth 1 --branch "$tag" "$url" "$TMP/src/$name.git" 2>"$TMP/git.log" \
      || die "could not fetch $name $tag from $url ($(tail -n 1 "$TMP/git.log")). On a machine without GitHub, put $file (see scripts/store-sources.sha256) in $VENDOR, or point STORE_VENDOR_DIR at a directory that holds it."
    local head; head="$(git -C "$TMP/src/$name.git" rev-parse HEAD)"
    [[ "$head" == "$commit" ]] || die "$url tag $tag is commit $head, not the pinned $commit."
    git -C "$TMP/src/$name.git" archive --format=tar.gz --prefix="$name/" "$commit" >"$TMP/src/$file"
  fi
  (cd "$TMP/src" && grep " $file\$" "$SUMS" | sha256sum -c --quiet --strict -) >/dev/null 2>&1 \
    || die "$file does not match its sum in scripts/store-sources.sha256 (got $(sha256sum "$TMP/src/$file" | cut -d' ' -f1)): a corrupt or different archive."
  tar -xzf "$TMP/src/$file" -C "$TMP/src"
}
fetch_source documentdb "$DOCUMENTDB_TAG" "$DOCUMENTDB_COMMIT" https://github.com/FerretDB/documentdb.git
fetch_source pg_cron "$PG_CRON_TAG" "$PG_CRON_COMMIT" https://github.com/citusdata/pg_cron.git
fetch_source pgvector "$PGVECTOR_TAG" "$PGVECTOR_COMMIT" https://github.com/pgvector/pgvector.git

# ---- 3. the extensions, built into the private root -----------------------------------------
export PG_CONFIG="$R/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
export PKG_CONFIG_SYSROOT_DIR="$R" PKG_CONFIG_LIBDIR="$LIBDIR/pkgconfig"
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
JOBS="${STORE_BUILD_JOBS:-2}"
build_ext() {
  local what="$1"; shift
  say "building $what…"
  make -C "$@" -j"$JOBS" PG_CONFIG="$PG_CONFIG" with_llvm=no install >"$TMP/make.log" 2>&1 \
    || die "building $what failed; the end of its log:"$'\n'"$(tail -n 30 "$TMP/make.log")"
}
build_ext pgvector "$TMP/src/pgvector" OPTFLAGS=""
# Debian's pg_cron is too old for documentdb's schedules ("invalid schedule: 2 seconds").
build_ext pg_cron "$TMP/src/pg_cron"
build_ext pg_documentdb_core "$TMP/src/documentdb/pg_documentdb_core"
# Debian's libbson 1.23 lacks BSON_SUBTYPE_SENSITIVE.
build_ext pg_documentdb "$TMP/src/documentdb/pg_documentdb" "COPT=-DBSON_SUBTYPE_SENSITIVE=0x08 -Wno-error=switch"

# ---- 4. FerretDB from the Go module proxy -----------------------------------------------------
say "building FerretDB $FERRETDB_VERSION…"
MOD_DIR="$(GOFLAGS=-mod=mod go mod download -json "github.com/FerretDB/FerretDB/v2@$FERRETDB_VERSION" 2>"$TMP/go.log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$MOD_DIR" && -d "$MOD_DIR" ]] || die "go mod download github.com/FerretDB/FerretDB/v2@$FERRETDB_VERSION failed (is the Go module proxy reachable?): $(tail -n 3 "$TMP/go.log")"
mkdir -p "$TMP/ferretdb-src"
cp -r "$MOD_DIR/." "$TMP/ferretdb-src/"
chmod -R u+w "$TMP/ferretdb-src"
# Generated at release time, absent from the module: without it the binary panics at start.
echo "$FERRETDB_VERSION" >"$TMP/ferretdb-src/build/version/version.txt"
# v2.5.0 builds its GOMAXPROCS helper only below Go 1.25 and has no variant above, so newer Go
# fails with "undefined: setGOMAXPROCS"; the helper is valid on every Go.
sed -i '/^\/\/go:build !go1.25$/d' "$TMP/ferretdb-src/cmd/ferretdb/gomaxprocs.go"
(cd "$TMP/ferretdb-src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$TMP/ferretdb" ./cmd/ferretdb) >"$TMP/go.log" 2>&1 \
  || die "building FerretDB failed: $(tail -n 20 "$TMP/go.log")"

# ---- done: only now does the cache directory exist -------------------------------------------
rm -rf "$TMP/debs" "$TMP/src" "$TMP/ferretdb-src" "$TMP"/*.log
# mktemp made it 0700: the cluster runs as an unprivileged user (see lib.sh), which reads the root.
chmod 755 "$TMP"
printf '%s\n' "key $KEY" "built $(date -u +%FT%TZ) in $((SECONDS - started)) s" >"$TMP/BUILD-INFO"
mv -T "$TMP" "$OUT"
trap - EXIT
say "built in $((SECONDS - started)) s: $OUT"
echo "$OUT"

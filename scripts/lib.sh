# Shared by start.sh, test.sh and .ci/run: make sure what the project needs is on this machine,
# or stop with a message that says what is missing and how to get it.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { echo "error: $*" >&2; exit 1; }

ensure_node() {
  command -v node >/dev/null 2>&1 || die "Node.js 20+ is missing: install it (https://nodejs.org or 'apt-get install nodejs npm')."
  local major; major="$(node -p 'process.versions.node.split(".")[0]')"
  [[ "$major" -ge 20 ]] || die "Node.js 20+ is required, found $(node --version)."
}

# Installs npm dependencies when node_modules is missing or older than the lock file, with
# `npm ci` (what the Dockerfile, Heroku's buildpack and CI run): the lock is the install. If the
# lock and package.json have drifted, npm ci refuses; we say so and fall back to npm install,
# which rewrites the lock (commit it). `npm run lock:check` (in .ci/run) fails on such drift.
ensure_node_modules() {
  ensure_node
  if [[ ! -d "$ROOT/node_modules" || "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]]; then
    echo "installing npm dependencies (npm ci)…" >&2
    if ! (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error); then
      echo "warning: npm ci failed (package-lock.json out of step with package.json, or the registry unreachable); trying npm install, which rewrites package-lock.json: commit it." >&2
      (cd "$ROOT" && npm install --no-audit --no-fund --loglevel=error) || die "npm install failed: is the npm registry reachable?"
    fi
  fi
}

# redis-server from Debian's packages.
ensure_redis_binary() {
  command -v redis-server >/dev/null 2>&1 && return 0
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server with apt-get…" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) || die "apt-get install redis-server failed."
    command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after apt-get."
  else
    die "redis-server is missing: run 'sudo apt-get install redis-server' (or set REDIS_URL for npm start)."
  fi
}

# wrk (Debian's package), the benchmark's load generator.
ensure_wrk() {
  command -v wrk >/dev/null 2>&1 && return 0
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing wrk with apt-get (the benchmark's load generator)…" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null) || die "apt-get install wrk failed."
    command -v wrk >/dev/null 2>&1 || die "wrk still missing after apt-get."
  else
    die "wrk is missing: run 'sudo apt-get install wrk' (or pass --loadgen autocannon to npm run bench)."
  fi
}

# Prints the path of a Chromium for the dashboard's browser test (playwright-core drives it),
# installing Debian's chromium when missing. CHROMIUM_BIN overrides.
ensure_chromium() {
  if [[ -n "${CHROMIUM_BIN:-}" ]]; then
    [[ -x "$CHROMIUM_BIN" ]] || die "CHROMIUM_BIN=$CHROMIUM_BIN is not an executable."
    echo "$CHROMIUM_BIN"; return 0
  fi
  local bin
  for bin in chromium chromium-browser google-chrome; do
    if command -v "$bin" >/dev/null 2>&1; then command -v "$bin"; return 0; fi
  done
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium with apt-get (for the dashboard's headless-browser test)…" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || die "apt-get install chromium failed."
    command -v chromium || die "chromium still missing after apt-get."
  else
    die "chromium is missing (the dashboard test drives it): run 'sudo apt-get install chromium', or set CHROMIUM_BIN to a Chrome/Chromium binary."
  fi
}

# Prints the directory of the local MongoDB stand-in (FerretDB v2 on PostgreSQL + DocumentDB),
# building it once (cached in .cache/store/, see scripts/store-build.sh).
ensure_store() {
  local out
  # A store already built elsewhere (another checkout's, a CI cache): used as it is.
  if [[ -n "${FI_STORE_DIR:-}" ]]; then
    [[ -f "$FI_STORE_DIR/BUILD-INFO" ]] || die "FI_STORE_DIR=$FI_STORE_DIR is not a built store (no BUILD-INFO in it); unset it to build one here."
    printf '%s\n' "$FI_STORE_DIR"
    return 0
  fi
  out="$(bash "$ROOT/scripts/store-build.sh" </dev/null)" || die "the local store could not be built (see above), or set MONGODB_URI to a MongoDB you run."
  printf '%s\n' "$out" | tail -n 1
}

# The preamble of test.sh, test-faults.sh and bench.sh: npm dependencies, redis-server, and the
# store built, its directory exported as FI_STORE_DIR for the suites that start their own servers.
ensure_test_servers() {
  ensure_node_modules
  ensure_redis_binary
  FI_STORE_DIR="$(ensure_store)" || exit 1
  export FI_STORE_DIR
}

# True when something answers a TCP connection on port $1 of host $2 (default 127.0.0.1).
port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

# Prints a TCP port free on loopback now (the OS picks it; a tiny race with other processes).
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{process.stdout.write(String(s.address().port));s.close();})'
}

# True when GET PATH on 127.0.0.1:PORT answers 200 (no curl needed).
http_ok() {
  local port="$1" path="$2" status
  status="$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3 && head -n 1 <&3) 2>/dev/null)" || return 1
  [[ "$status" == *" 200 "* ]]
}

wait_port() {
  local port="$1" what="$2"
  for _ in $(seq 1 150); do port_open "$port" && return 0; sleep 0.1; done
  die "$what did not start listening on port $port."
}

# ---- the local store: a private PostgreSQL cluster with DocumentDB, FerretDB v2 on it ----------
# Never the machine's own PostgreSQL: a cluster of our own, in a directory of our own, on a port
# of our own, with its socket in its data directory, run from the store's private root
# (ensure_store). initdb refuses to run as root, so as root the cluster runs as an unprivileged
# user (FI_PG_USER, default fi-postgres), created once.
FI_PG_USER="${FI_PG_USER:-fi-postgres}"
PG_MAJOR=15

# Runs a command as the cluster's owner: FI_PG_USER when we are root, else ourselves.
as_pg_user() {
  if [[ "$(id -u)" == 0 ]]; then runuser -u "$FI_PG_USER" -- "$@"; else "$@"; fi
}

ensure_pg_user() {
  [[ "$(id -u)" == 0 ]] || return 0
  id -u "$FI_PG_USER" >/dev/null 2>&1 && return 0
  echo "creating the unprivileged user $FI_PG_USER (initdb refuses to run as root)…" >&2
  # Two clusters starting at once (the bench starts two) race here: the loser finds the user made.
  useradd --system --no-create-home --shell /usr/sbin/nologin "$FI_PG_USER" 2>/dev/null \
    || id -u "$FI_PG_USER" >/dev/null 2>&1 || die "useradd $FI_PG_USER failed."
}

# pg_tool STORE TOOL ARGS…: one of the private root's PostgreSQL programs, with its libraries,
# as the cluster's owner.
pg_tool() {
  local store="$1" tool="$2"; shift 2
  as_pg_user env LD_LIBRARY_PATH="$store/root/usr/lib/x86_64-linux-gnu:$store/root/usr/lib/postgresql/$PG_MAJOR/lib" PROJ_DATA="$store/root/usr/share/proj" \
    "$store/root/usr/lib/postgresql/$PG_MAJOR/bin/$tool" "$@"
}

# What DocumentDB needs loaded and set (the settings FerretDB's documentation lists).
store_pg_settings() {
  cat <<'EOF'
shared_preload_libraries = 'pg_cron,pg_documentdb_core,pg_documentdb'
cron.database_name = 'postgres'
documentdb.enableCompact = true
documentdb.enableLetAndCollationForQueryMatch = true
documentdb.enableNowSystemVariable = true
documentdb.enableSortbyIdPushDownToPrimaryKey = true
documentdb.enableSchemaValidation = true
documentdb.enableBypassDocumentValidation = true
documentdb.enableUserCrud = true
documentdb.maxUserLimit = 100
# Index terms as a B-tree key has them: one per document holding all the key's fields in order, not one per field
# (DocumentDB's default). With one per field every insert lengthens the entry lists of low-cardinality values (a dataset,
# a status, an annotator): seeding 100,000 records with the worker's indexes cost 271 µs of store CPU per document
# instead of 42. Applies to indexes created after it. Safe since no index of the worker is unique (worker/indexes.ts):
# beside a unique index, inserts crashed a backend (signal 11 under the uniqueness check's RUM scan) with it, and more
# rarely without it; with no unique index, no crash in 3M- and 6M-document seeds (docs/store.md).
documentdb.defaultUseCompositeOpClass = true
# FerretDB opens a PostgreSQL connection per client command in flight: room for a few hundred.
max_connections = 300
EOF
}

# store_pg_start STORE DIR PORT: initialises DIR when it holds no cluster (with DocumentDB's
# settings), starts it on 127.0.0.1:PORT and creates the extension documentdb in the database
# postgres. A cluster of DIR left running by an earlier run is stopped first, so that it listens
# on PORT.
store_pg_start() {
  local store="$1" dir="$2" port="$3"
  ensure_pg_user
  mkdir -p "$dir"
  if [[ "$(id -u)" == 0 ]]; then
    chown "$FI_PG_USER:" "$dir"
    # Every parent must be traversable by the cluster's owner, or initdb fails with a less clear message.
    as_pg_user test -x "$dir" -a -w "$dir" || die "$FI_PG_USER cannot reach $dir: a parent directory is not traversable (chmod o+x), or put the data elsewhere."
    as_pg_user test -x "$store/root/usr/lib/postgresql/$PG_MAJOR/bin/postgres" || die "$FI_PG_USER cannot run PostgreSQL from $store: a parent directory is not traversable (chmod o+x)."
  fi
  chmod 700 "$dir"
  if [[ ! -f "$dir/PG_VERSION" ]]; then
    local out
    out="$(pg_tool "$store" initdb -D "$dir" -U postgres -A trust --encoding=UTF8 --locale=C.UTF-8 2>&1)" || die "initdb failed: $out"
    store_pg_settings | as_pg_user tee -a "$dir/postgresql.conf" >/dev/null
  fi
  if pg_tool "$store" pg_ctl -D "$dir" status >/dev/null 2>&1; then
    echo "stopping the PostgreSQL left running in $dir by an earlier run…" >&2
    store_pg_stop "$store" "$dir"
  fi
  port_open "$port" && die "port $port is taken: choose another one for the private PostgreSQL."
  # The socket lives in the data directory; Unix socket paths are limited to 107 bytes.
  (( ${#dir} + 20 < 108 )) || die "$dir is too long a path for PostgreSQL's socket: put the data in a shorter one."
  pg_tool "$store" pg_ctl -D "$dir" -l "$dir/server.log" -w -t 60 start \
    -o "-p $port -k '$dir' -c listen_addresses=127.0.0.1" >/dev/null || die "PostgreSQL did not start (see $dir/server.log)."
  local out
  out="$(pg_tool "$store" psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres \
    -c 'CREATE EXTENSION IF NOT EXISTS documentdb CASCADE' 2>&1)" || die "CREATE EXTENSION documentdb failed: $out"
}

# store_pg_stop STORE DIR: fast shutdown (aborts open transactions, writes a checkpoint); quiet
# when the cluster is not running.
store_pg_stop() {
  local store="$1" dir="$2"
  [[ -f "$dir/postmaster.pid" ]] || return 0
  pg_tool "$store" pg_ctl -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}

# store_ferretdb_exec STORE PG_PORT PORT DEBUG_PORT STATE_DIR: replaces the shell with FerretDB
# on the cluster of PG_PORT (one process: signals reach FerretDB, its pid is the caller's).
# MongoDB clients connect to PORT without credentials; GET /debug/readyz on DEBUG_PORT answers
# once it is ready.
store_ferretdb_exec() {
  local store="$1" pg_port="$2" port="$3" debug_port="$4" state_dir="$5"
  mkdir -p "$state_dir"
  exec "$store/ferretdb" --postgresql-url="postgres://postgres@127.0.0.1:$pg_port/postgres" \
    --listen-addr="127.0.0.1:$port" --debug-addr="127.0.0.1:$debug_port" --state-dir="$state_dir" \
    --no-auth --telemetry=disable --log-level="${FERRETDB_LOG_LEVEL:-warn}"
}

# store_wait_ready DEBUG_PORT PID: until FerretDB's /debug/readyz answers 200 (60 s at most);
# stops with a message if the process PID exits first.
store_wait_ready() {
  local debug_port="$1" pid="$2"
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || die "FerretDB exited at start."
    http_ok "$debug_port" /debug/readyz && return 0
    sleep 0.1
  done
  die "FerretDB was not ready after 60 s (GET http://127.0.0.1:$debug_port/debug/readyz)."
}

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

# Prints the path of the FerretDB binary, building it once (cached in .cache/ferretdb).
ensure_ferretdb() {
  bash "$ROOT/scripts/ferretdb-build.sh" | tail -n 1
}

# The preamble of test.sh, test-faults.sh and bench.sh: npm dependencies, redis-server, and the
# FerretDB binary exported as FERRETDB_BIN for the suites that start their own servers.
ensure_test_servers() {
  ensure_node_modules
  ensure_redis_binary
  FERRETDB_BIN="$(ensure_ferretdb)" || exit 1
  export FERRETDB_BIN
}

# True when something answers a TCP connection on port $1 of host $2 (default 127.0.0.1).
port_open() { (exec 3<>"/dev/tcp/${2:-127.0.0.1}/$1") 2>/dev/null; }

wait_port() {
  local port="$1" what="$2"
  for _ in $(seq 1 150); do port_open "$port" && return 0; sleep 0.1; done
  die "$what did not start listening on port $port."
}

# ---- private PostgreSQL cluster (the store of FerretDB on PostgreSQL) -----------------------
# Never the machine's own PostgreSQL: a cluster of our own, in a directory of our own, on a port
# of our own, with its socket in its data directory. initdb refuses to run as root, so as root the
# cluster runs as an unprivileged user (FI_PG_USER, default fi-postgres), created once.
FI_PG_USER="${FI_PG_USER:-fi-postgres}"

# Prints the directory of PostgreSQL's server binaries (initdb, pg_ctl), installing Debian's
# postgresql when missing. The newest installed major version wins.
ensure_postgres_binaries() {
  local initdb
  initdb="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)"
  if [[ -z "$initdb" ]]; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
      echo "installing postgresql with apt-get (FerretDB's store)…" >&2
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || die "apt-get install postgresql failed."
      initdb="$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1)"
      [[ -n "$initdb" ]] || die "initdb still missing after apt-get install postgresql."
    else
      die "PostgreSQL's server binaries (/usr/lib/postgresql/*/bin/initdb) are missing: run 'sudo apt-get install postgresql' (or use LOCAL_STORE=sqlite / set MONGODB_URI)."
    fi
  fi
  command -v psql >/dev/null 2>&1 || die "psql is missing: run 'sudo apt-get install postgresql-client'."
  dirname "$initdb"
}

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

# pg_cluster_start DIR PORT: initialises DIR when empty, starts the cluster on 127.0.0.1:PORT and
# creates the database `ferretdb` (UTF8, locale C, as FerretDB requires). A cluster of DIR left
# running by an earlier run is stopped first, so that it listens on PORT.
pg_cluster_start() {
  local dir="$1" port="$2" bin
  bin="$(ensure_postgres_binaries)"
  ensure_pg_user
  mkdir -p "$dir"
  if [[ "$(id -u)" == 0 ]]; then
    chown "$FI_PG_USER:" "$dir"
    # Every parent must be traversable by the cluster's owner, or initdb fails with a less clear message.
    as_pg_user test -x "$dir" -a -w "$dir" || die "$FI_PG_USER cannot reach $dir: a parent directory is not traversable (chmod o+x), or put the data elsewhere."
  fi
  chmod 700 "$dir"
  if [[ ! -f "$dir/PG_VERSION" ]]; then
    local out
    out="$(as_pg_user "$bin/initdb" -D "$dir" -U postgres -A trust --encoding=UTF8 --locale=C 2>&1)" || die "initdb failed: $out"
  fi
  if as_pg_user "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    echo "stopping the PostgreSQL left running in $dir by an earlier run…" >&2
    as_pg_user "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
  fi
  port_open "$port" && die "port $port is taken: choose another one for the private PostgreSQL."
  # The socket lives in the data directory; Unix socket paths are limited to 107 bytes.
  (( ${#dir} + 20 < 108 )) || die "$dir is too long a path for PostgreSQL's socket: put the data in a shorter one."
  as_pg_user "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start \
    -o "-p $port -k '$dir' -c listen_addresses=127.0.0.1" >/dev/null || die "PostgreSQL did not start (see $dir/server.log)."
  local sql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres -tA)
  if [[ -z "$("${sql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = 'ferretdb'")" ]]; then
    "${sql[@]}" -c "CREATE DATABASE ferretdb ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0" \
      || die "could not create the database ferretdb."
  fi
}

# pg_cluster_stop DIR: fast shutdown (aborts open transactions, writes a checkpoint); quiet when
# the cluster is not running.
pg_cluster_stop() {
  local dir="$1" bin
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$bin" && -f "$dir/postmaster.pid" ]] || return 0
  as_pg_user "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
}

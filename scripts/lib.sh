# Shared by start.sh, test.sh and .ci/run: make sure what the project needs is on this machine,
# or stop with a message that says what is missing and how to get it.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { echo "error: $*" >&2; exit 1; }

ensure_node() {
  command -v node >/dev/null 2>&1 || die "Node.js 20+ is missing: install it (https://nodejs.org or 'apt-get install nodejs npm')."
  local major; major="$(node -p 'process.versions.node.split(".")[0]')"
  [[ "$major" -ge 20 ]] || die "Node.js 20+ is required, found $(node --version)."
}

# Installs npm dependencies when node_modules is missing or older than the lock file.
ensure_node_modules() {
  ensure_node
  if [[ ! -d "$ROOT/node_modules" || "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]]; then
    echo "installing npm dependencies…" >&2
    # npm install, not npm ci: the lock file follows package-lock.json exactly either way, but npm ci
    # rejects a lock that lacks optional platform packages (msgpackr-extract's macOS/Windows builds)
    # which some registry mirrors do not serve.
    (cd "$ROOT" && npm install --no-audit --no-fund --loglevel=error) || die "npm install failed: is the npm registry reachable?"
  fi
}

# redis-server from Debian's packages.
ensure_redis_binary() {
  command -v redis-server >/dev/null 2>&1 && return 0
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server with apt-get…" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) || die "apt-get install redis-server failed."
    # Debian's package starts a service on 6379; we start our own, so stop that one if it was just started.
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

# True when something answers a TCP connection on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port="$1" what="$2"
  for _ in $(seq 1 150); do port_open "$port" && return 0; sleep 0.1; done
  die "$what did not start listening on port $port."
}

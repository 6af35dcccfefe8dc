#!/usr/bin/env bash
# The README's start command: API + worker, with a Redis and a FerretDB of its own unless
# REDIS_URL / MONGODB_URI point elsewhere. Local data lives in LOCAL_RUN_DIR (default .run/,
# git-ignored). SIGINT or SIGTERM to this process (Ctrl-C, or a supervisor signalling only the
# top process) stops everything it started, then it exits by that signal. package.json runs it
# with `exec`: npm runs a script as `sh -c '…'` and forwards SIGTERM/SIGINT to that sh, which
# would die of it and leave this script, and all it started, running.
#
# It never uses a server it finds listening: a Redis someone else runs may have AOF off or evict
# keys, and a foreign database gets our writes. Its own servers listen on project ports
# (LOCAL_REDIS_PORT, default 6390; LOCAL_MONGODB_PORT, default 27017); a taken port stops it with
# a message. The local FerretDB stores into a private PostgreSQL cluster (data in
# LOCAL_RUN_DIR/postgres, port LOCAL_POSTGRES_PORT, default 54329) with GIN indexes that serve _id
# reads and conditional updates (scripts/ferretdb-pg-setup.ts); LOCAL_STORE=sqlite runs FerretDB
# on SQLite instead (LOCAL_RUN_DIR/ferretdb), where every such filter scans the whole collection.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

RUN_DIR="${LOCAL_RUN_DIR:-$ROOT/.run}"
LOCAL_STORE="${LOCAL_STORE:-postgresql}"
LOCAL_POSTGRES_PORT="${LOCAL_POSTGRES_PORT:-54329}"
LOCAL_REDIS_PORT="${LOCAL_REDIS_PORT:-6390}"
LOCAL_MONGODB_PORT="${LOCAL_MONGODB_PORT:-27017}"
export PORT="${PORT:-3000}"
# This is the development command: loopback unless told otherwise (the API refuses the
# development key on any other address). Platforms run `node dist/api/main.js`, default 0.0.0.0.
export HOST="${HOST:-127.0.0.1}"

# The API flushes its pending writes to Redis and the worker finishes its jobs on SIGTERM, so
# both stop before the servers they write to.
APP_PIDS=()
SERVER_PIDS=()
PG_DIR=""

stop_pids() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

stop_all() {
  stop_pids "${APP_PIDS[@]}"
  APP_PIDS=()
  stop_pids "${SERVER_PIDS[@]}"
  SERVER_PIDS=()
  # After FerretDB has gone, so that it does not log a lost connection for every client.
  if [[ -n "$PG_DIR" ]]; then pg_cluster_stop "$PG_DIR"; PG_DIR=""; fi
}

# Bash runs a trap once the foreground command ends; while it waits in `wait -n` (where this
# script spends its life) that is at once. A second signal while stopping is ignored: stopping
# is already under way. Then it dies by the same signal, so that its parent (npm, a supervisor,
# a shell) sees why it ended (exit status 130 for SIGINT, 143 for SIGTERM).
on_signal() {
  local signal="$1"
  trap '' INT TERM
  echo "feedback-ingest: SIG$signal received: stopping the API, the worker and the servers this run started…" >&2
  stop_all
  echo "feedback-ingest: stopped." >&2
  trap - "$signal" EXIT
  kill -s "$signal" "$$"
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap stop_all EXIT

ensure_node_modules
mkdir -p "$RUN_DIR"

port_taken_hint() {
  echo "stop it (an earlier npm start left running?), choose another $1, or set $2 to use that server on purpose."
}

if [[ -n "${REDIS_URL:-}" || -n "${REDIS_TLS_URL:-}" ]]; then
  echo "Redis: REDIS_URL${REDIS_TLS_URL:+ (REDIS_TLS_URL)} is set: using that Redis, not starting one." >&2
  REDIS_ORIGIN="given by REDIS_URL"
else
  port_open "$LOCAL_REDIS_PORT" && die "port $LOCAL_REDIS_PORT (LOCAL_REDIS_PORT) is taken: npm start runs a Redis of its own there; $(port_taken_hint LOCAL_REDIS_PORT REDIS_URL)"
  ensure_redis_binary
  mkdir -p "$RUN_DIR/redis"
  redis-server --port "$LOCAL_REDIS_PORT" --bind 127.0.0.1 --dir "$RUN_DIR/redis" --save '' \
    --appendonly yes --appendfsync everysec --maxmemory-policy noeviction >"$RUN_DIR/redis.log" 2>&1 &
  SERVER_PIDS+=($!)
  wait_port "$LOCAL_REDIS_PORT" "redis-server"
  export REDIS_URL="redis://127.0.0.1:$LOCAL_REDIS_PORT"
  REDIS_ORIGIN="started by npm start: AOF everysec, noeviction, data in $RUN_DIR/redis"
  echo "Redis: started its own on 127.0.0.1:$LOCAL_REDIS_PORT (AOF everysec, noeviction; data in $RUN_DIR/redis)." >&2
fi

if [[ -n "${MONGODB_URI:-}" ]]; then
  echo "MongoDB: MONGODB_URI is set: using that server, not starting one." >&2
  MONGODB_ORIGIN="given by MONGODB_URI"
else
  port_open "$LOCAL_MONGODB_PORT" && die "port $LOCAL_MONGODB_PORT (LOCAL_MONGODB_PORT) is taken: npm start runs a FerretDB of its own there; $(port_taken_hint LOCAL_MONGODB_PORT MONGODB_URI)"
  FERRETDB_BIN="$(ensure_ferretdb)"
  FERRETDB_FLAGS=(--listen-addr="127.0.0.1:$LOCAL_MONGODB_PORT" --debug-addr=- --state-dir=- --telemetry=disable --log-level=warn)
  export MONGODB_URI="mongodb://127.0.0.1:$LOCAL_MONGODB_PORT/feedback"
  case "$LOCAL_STORE" in
    sqlite)
      mkdir -p "$RUN_DIR/ferretdb"
      "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$RUN_DIR/ferretdb/" "${FERRETDB_FLAGS[@]}" >"$RUN_DIR/ferretdb.log" 2>&1 &
      SERVER_PIDS+=($!)
      wait_port "$LOCAL_MONGODB_PORT" "FerretDB"
      MONGODB_ORIGIN="FerretDB started by npm start, on SQLite in $RUN_DIR/ferretdb"
      ;;
    postgresql)
      PG_DIR="$RUN_DIR/postgres"
      pg_cluster_start "$PG_DIR" "$LOCAL_POSTGRES_PORT"
      PG_URL="postgres://postgres@127.0.0.1:$LOCAL_POSTGRES_PORT/ferretdb"
      "$FERRETDB_BIN" --handler=postgresql --postgresql-url="$PG_URL" "${FERRETDB_FLAGS[@]}" >"$RUN_DIR/ferretdb.log" 2>&1 &
      SERVER_PIDS+=($!)
      wait_port "$LOCAL_MONGODB_PORT" "FerretDB"
      # The collections and GIN indexes of the database that the API and worker use (MONGODB_URI's path).
      npx --no-install tsx scripts/ferretdb-pg-setup-main.ts --postgresql-url="$PG_URL" >&2 || die "the FerretDB store setup failed."
      MONGODB_ORIGIN="FerretDB started by npm start, on a private PostgreSQL on port $LOCAL_POSTGRES_PORT, data in $PG_DIR"
      ;;
    *) die "LOCAL_STORE must be postgresql (default) or sqlite, not '$LOCAL_STORE'." ;;
  esac
  echo "MongoDB: started its own FerretDB on 127.0.0.1:$LOCAL_MONGODB_PORT ($MONGODB_ORIGIN)." >&2
fi

if [[ -z "${API_KEYS:-}" ]]; then
  # The secret is DEV_API_KEY_SECRET of api/dev-key-guard.ts, which refuses it off loopback.
  export API_KEYS="dev:dev-secret-key-change-me"
  # Every scope, so that the README's examples and the admin pages work on a first run.
  export ADMIN_API_KEY_NAMES="dev${ADMIN_API_KEY_NAMES:+,$ADMIN_API_KEY_NAMES}"
  KEY_LINE="development key \"dev\" (API_KEYS was not set): Authorization: Bearer dev-secret-key-change-me
           scopes: every one (writes to any dataset; admin: /admin/queues, /admin/dead-letters; admin keys also read any dataset)"
else
  KEY_LINE="the keys of API_KEYS${ADMIN_API_KEY_NAMES:+ (admin: $ADMIN_API_KEY_NAMES)}"
fi

echo "building (tsc)…" >&2
npm run --silent build
node dist/api/main.js &
API_PID=$!
APP_PIDS+=("$API_PID")
node dist/worker/main.js &
APP_PIDS+=($!)

# Announce once the API answers (it logs "api listening" itself); if it exits instead (a taken
# PORT, a refused setting), `wait -n` below sees it and the script stops with its exit code.
case "$HOST" in 0.0.0.0 | :: | 127.* | localhost) CHECK_HOST=127.0.0.1 ;; ::1) CHECK_HOST=localhost ;; *) CHECK_HOST="$HOST" ;; esac
for _ in $(seq 1 600); do
  port_open "$PORT" "$CHECK_HOST" && break
  kill -0 "$API_PID" 2>/dev/null || break
  sleep 0.1
done
if port_open "$PORT" "$CHECK_HOST"; then
  redact() { node --input-type=module -e 'import { redactUrl } from "./dist/shared/redact-url.js"; process.stdout.write(redactUrl(process.argv[1]));' "$1"; }
  REDIS_SHOWN="$(redact "${REDIS_TLS_URL:-$REDIS_URL}")"
  MONGODB_SHOWN="$(redact "$MONGODB_URI")"
  case "$HOST" in 127.* | ::1 | localhost) REACH="this machine only; HOST=0.0.0.0 to listen on every interface, with API_KEYS of your own" ;; *) REACH="every client that can reach $HOST" ;; esac
  cat >&2 <<EOF
feedback-ingest is running. Ctrl-C (or SIGTERM / SIGINT to this process) stops everything it started.
  API      http://$CHECK_HOST:$PORT (HOST=$HOST: $REACH)
  worker   running
  Redis    $REDIS_SHOWN ($REDIS_ORIGIN)
  MongoDB  $MONGODB_SHOWN ($MONGODB_ORIGIN)
  key      $KEY_LINE
  admin    other keys: name them in ADMIN_API_KEY_NAMES (keys of API_KEYS), or create a stored admin key:
           MONGODB_URI=$MONGODB_SHOWN npm run keys -- create --name ops --admin
  CLIs     npm run keys / npm run dead-letters against this run need REDIS_URL=$REDIS_SHOWN MONGODB_URI=$MONGODB_SHOWN
EOF
fi
wait -n "${APP_PIDS[@]}" "${SERVER_PIDS[@]}"

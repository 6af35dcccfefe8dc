#!/usr/bin/env bash
# The README's start command: API + worker, with local Redis and FerretDB unless REDIS_URL /
# MONGODB_URI point elsewhere. Local data lives in .run/ (git-ignored). Ctrl-C stops everything.
#
# The local FerretDB stores into a private PostgreSQL cluster (data in .run/postgres, port
# LOCAL_POSTGRES_PORT, default 54329) with GIN indexes that serve _id reads and conditional
# updates (scripts/ferretdb-pg-setup.ts); LOCAL_STORE=sqlite runs FerretDB on SQLite instead
# (.run/ferretdb), where every such filter scans the whole collection.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_node_modules
mkdir -p .run
PIDS=()
PG_DIR=""
LOCAL_STORE="${LOCAL_STORE:-postgresql}"
LOCAL_POSTGRES_PORT="${LOCAL_POSTGRES_PORT:-54329}"
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # After FerretDB has gone, so that it does not log a lost connection for every client.
  if [[ -n "$PG_DIR" ]]; then pg_cluster_stop "$PG_DIR"; PG_DIR=""; fi
}
trap cleanup EXIT INT TERM

if [[ -z "${REDIS_URL:-}" && -z "${REDIS_TLS_URL:-}" ]]; then
  if port_open 6379; then
    echo "using the Redis already listening on 127.0.0.1:6379" >&2
  else
    ensure_redis_binary
    mkdir -p .run/redis
    redis-server --port 6379 --bind 127.0.0.1 --dir "$ROOT/.run/redis" --save '' \
      --appendonly yes --appendfsync everysec --maxmemory-policy noeviction >.run/redis.log 2>&1 &
    PIDS+=($!)
    wait_port 6379 "redis-server"
    echo "started Redis on 127.0.0.1:6379 (AOF everysec, noeviction; data in .run/redis)" >&2
  fi
fi
if [[ -z "${MONGODB_URI:-}" ]]; then
  if port_open 27017; then
    echo "using the MongoDB-compatible server already listening on 127.0.0.1:27017" >&2
  else
    FERRETDB_BIN="$(ensure_ferretdb)"
    FERRETDB_FLAGS=(--listen-addr=127.0.0.1:27017 --debug-addr=- --state-dir=- --telemetry=disable --log-level=warn)
    case "$LOCAL_STORE" in
      sqlite)
        mkdir -p .run/ferretdb
        "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$ROOT/.run/ferretdb/" "${FERRETDB_FLAGS[@]}" >.run/ferretdb.log 2>&1 &
        PIDS+=($!)
        wait_port 27017 "FerretDB"
        echo "started FerretDB on 127.0.0.1:27017 (SQLite in .run/ferretdb)" >&2
        ;;
      postgresql)
        PG_DIR="$ROOT/.run/postgres"
        pg_cluster_start "$PG_DIR" "$LOCAL_POSTGRES_PORT"
        PG_URL="postgres://postgres@127.0.0.1:$LOCAL_POSTGRES_PORT/ferretdb"
        "$FERRETDB_BIN" --handler=postgresql --postgresql-url="$PG_URL" "${FERRETDB_FLAGS[@]}" >.run/ferretdb.log 2>&1 &
        PIDS+=($!)
        wait_port 27017 "FerretDB"
        # The collections and GIN indexes of the database that the API and worker use (MONGODB_URI's default).
        npx --no-install tsx scripts/ferretdb-pg-setup-main.ts --postgresql-url="$PG_URL" >&2 || die "the FerretDB store setup failed."
        echo "started FerretDB on PostgreSQL (private cluster on port $LOCAL_POSTGRES_PORT, data in .run/postgres; FerretDB on 127.0.0.1:27017)" >&2
        ;;
      *) die "LOCAL_STORE must be postgresql (default) or sqlite, not '$LOCAL_STORE'." ;;
    esac
  fi
fi
if [[ -z "${API_KEYS:-}" ]]; then
  export API_KEYS="dev:dev-secret-key-change-me"
  echo "API_KEYS not set: using the development key 'dev-secret-key-change-me' (Authorization: Bearer dev-secret-key-change-me)" >&2
fi

echo "building (tsc)…" >&2
npm run --silent build
node dist/api/main.js &
PIDS+=($!)
node dist/worker/main.js &
PIDS+=($!)
echo "feedback-ingest: API on http://127.0.0.1:${PORT:-3000}, worker running. Ctrl-C to stop." >&2
wait -n "${PIDS[@]}"

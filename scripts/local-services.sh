# The local Redis and store of `npm start` (scripts/start.sh) and `npm run services`
# (scripts/services.sh), sourced by both after lib.sh so that the two start the same servers the
# same way: same settings, ports and run directory.
#
# It never uses a server it finds listening: a Redis someone else runs may have AOF off or evict
# keys, and a foreign database gets our writes. Its own servers listen on project ports
# (LOCAL_REDIS_PORT, default 6390; LOCAL_MONGODB_PORT, default 27017); a taken port stops it with
# a message. The store is FerretDB v2 on a private PostgreSQL cluster with DocumentDB (data in
# LOCAL_RUN_DIR/postgres, port LOCAL_POSTGRES_PORT, default 54329; FerretDB's readiness endpoint
# on LOCAL_FERRETDB_DEBUG_PORT, default a free port). Local data lives in LOCAL_RUN_DIR (default
# .run/, git-ignored). REDIS_URL / MONGODB_URI, when set, are used instead of starting a server.

RUN_DIR="${LOCAL_RUN_DIR:-$ROOT/.run}"
LOCAL_POSTGRES_PORT="${LOCAL_POSTGRES_PORT:-54329}"
LOCAL_REDIS_PORT="${LOCAL_REDIS_PORT:-6390}"
LOCAL_MONGODB_PORT="${LOCAL_MONGODB_PORT:-27017}"

# Processes started here, stopped by stop_local_servers; the cluster is a daemon (pg_ctl).
SERVER_PIDS=()
PG_DIR=""
STORE_DIR=""

port_taken_hint() {
  echo "stop it (an earlier run left it running?), choose another $1, or set $2 to use that server on purpose."
}

# Sets REDIS_URL (exported) and REDIS_ORIGIN.
start_local_redis() {
  if [[ -n "${REDIS_URL:-}" || -n "${REDIS_TLS_URL:-}" ]]; then
    echo "Redis: REDIS_URL${REDIS_TLS_URL:+ (REDIS_TLS_URL)} is set: using that Redis, not starting one." >&2
    REDIS_ORIGIN="given by REDIS_URL"
    return 0
  fi
  port_open "$LOCAL_REDIS_PORT" && die "port $LOCAL_REDIS_PORT (LOCAL_REDIS_PORT) is taken: a Redis of this project's own runs there; $(port_taken_hint LOCAL_REDIS_PORT REDIS_URL)"
  ensure_redis_binary
  mkdir -p "$RUN_DIR/redis"
  redis-server --port "$LOCAL_REDIS_PORT" --bind 127.0.0.1 --dir "$RUN_DIR/redis" --save '' \
    --appendonly yes --appendfsync everysec --maxmemory-policy noeviction >"$RUN_DIR/redis.log" 2>&1 &
  SERVER_PIDS+=($!)
  wait_port "$LOCAL_REDIS_PORT" "redis-server"
  export REDIS_URL="redis://127.0.0.1:$LOCAL_REDIS_PORT"
  REDIS_ORIGIN="AOF everysec, noeviction, data in $RUN_DIR/redis"
  echo "Redis: started its own on 127.0.0.1:$LOCAL_REDIS_PORT (AOF everysec, noeviction; data in $RUN_DIR/redis)." >&2
}

# Sets MONGODB_URI (exported) and MONGODB_ORIGIN.
start_local_store() {
  if [[ -n "${MONGODB_URI:-}" ]]; then
    echo "MongoDB: MONGODB_URI is set: using that server, not starting one." >&2
    MONGODB_ORIGIN="given by MONGODB_URI"
    return 0
  fi
  port_open "$LOCAL_MONGODB_PORT" && die "port $LOCAL_MONGODB_PORT (LOCAL_MONGODB_PORT) is taken: a FerretDB of this project's own runs there; $(port_taken_hint LOCAL_MONGODB_PORT MONGODB_URI)"
  local debug_port="${LOCAL_FERRETDB_DEBUG_PORT:-}"
  [[ -n "$debug_port" ]] || debug_port="$(free_port)"
  port_open "$debug_port" && die "port $debug_port (LOCAL_FERRETDB_DEBUG_PORT) is taken: choose another one for FerretDB's debug endpoint."
  STORE_DIR="$(ensure_store)" || exit 1
  PG_DIR="$RUN_DIR/postgres"
  store_pg_start "$STORE_DIR" "$PG_DIR" "$LOCAL_POSTGRES_PORT"
  (store_ferretdb_exec "$STORE_DIR" "$LOCAL_POSTGRES_PORT" "$LOCAL_MONGODB_PORT" "$debug_port" "$RUN_DIR/ferretdb") >"$RUN_DIR/ferretdb.log" 2>&1 &
  SERVER_PIDS+=($!)
  store_wait_ready "$debug_port" "$!"
  export MONGODB_URI="mongodb://127.0.0.1:$LOCAL_MONGODB_PORT/feedback"
  MONGODB_ORIGIN="FerretDB v2 on a private PostgreSQL + DocumentDB on port $LOCAL_POSTGRES_PORT, data in $PG_DIR"
  echo "MongoDB: started its own FerretDB on 127.0.0.1:$LOCAL_MONGODB_PORT ($MONGODB_ORIGIN)." >&2
}

# Stops what start_local_redis and start_local_store started: the servers by pid, then the
# cluster, after FerretDB has gone so that it does not log a lost connection for every client.
stop_local_servers() {
  stop_pids "${SERVER_PIDS[@]}"
  SERVER_PIDS=()
  if [[ -n "$PG_DIR" ]]; then store_pg_stop "$STORE_DIR" "$PG_DIR"; PG_DIR=""; fi
}

stop_pids() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

#!/usr/bin/env bash
# The README's start command: API + worker, with a Redis and a MongoDB stand-in of its own unless
# REDIS_URL / MONGODB_URI point elsewhere (scripts/local-services.sh: ports, run directory, the
# store). SIGINT or SIGTERM to this process (Ctrl-C, or a supervisor signalling only the top
# process) stops everything it started, then it exits by that signal. package.json runs it with
# `exec`: npm runs a script as `sh -c '…'` and forwards SIGTERM/SIGINT to that sh, which would die
# of it and leave this script, and all it started, running.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/scripts/local-services.sh"
cd "$ROOT"

export PORT="${PORT:-3000}"
# This is the development command: loopback unless told otherwise (the API refuses the
# development key on any other address). Platforms run `node dist/api/main.js`, default 0.0.0.0.
export HOST="${HOST:-127.0.0.1}"

# The API flushes its pending writes to Redis and the worker finishes its jobs on SIGTERM, so
# both stop before the servers they write to.
APP_PIDS=()

stop_all() {
  stop_pids "${APP_PIDS[@]}"
  APP_PIDS=()
  stop_local_servers
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
start_local_redis
start_local_store

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
# One of them ended on its own: say so (under `set -e` a bare `wait -n` would end the script
# silently), then the EXIT trap stops the rest and the script ends with that exit status.
status=0
wait -n "${APP_PIDS[@]}" "${SERVER_PIDS[@]}" || status=$?
echo "start: a process it started stopped on its own (exit status $status; the servers' logs are in $RUN_DIR/*.log); stopping the rest." >&2
exit $((status == 0 ? 1 : status))

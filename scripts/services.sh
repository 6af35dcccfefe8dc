#!/usr/bin/env bash
# `npm run services`: only the local Redis and store that `npm start` would start (same LOCAL_*
# settings, ports and run directory: scripts/local-services.sh), for running other programs
# against them. Prints `REDIS_URL=…` and `MONGODB_URI=…` on stdout once both serve (everything
# else goes to stderr), then waits. SIGINT or SIGTERM stops them, then it exits by that signal.
# package.json runs it with `exec` for the reason start.sh gives.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$ROOT/scripts/local-services.sh"
cd "$ROOT"

on_signal() {
  local signal="$1"
  trap '' INT TERM
  echo "services: SIG$signal received: stopping the servers this run started…" >&2
  stop_local_servers
  echo "services: stopped." >&2
  trap - "$signal" EXIT
  kill -s "$signal" "$$"
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap stop_local_servers EXIT

ensure_node
mkdir -p "$RUN_DIR"
start_local_redis
start_local_store
echo "REDIS_URL=${REDIS_TLS_URL:-$REDIS_URL}"
echo "MONGODB_URI=$MONGODB_URI"
echo "services: running; Ctrl-C (or SIGTERM / SIGINT to this process) stops them." >&2
if [[ ${#SERVER_PIDS[@]} -gt 0 ]]; then
  # Ends when a server dies; the EXIT trap stops the other one.
  # `|| status=$?`: under `set -e` a server killed would end the script here, without the message.
  status=0
  wait -n "${SERVER_PIDS[@]}" || status=$?
  die "a server stopped on its own (exit status $status; see $RUN_DIR/*.log)."
fi
# Both were given (REDIS_URL and MONGODB_URI): nothing of ours to watch; wait for the signal
# (the sleep is stopped with the servers).
while true; do
  sleep 3600 &
  SERVER_PIDS=($!)
  wait "$!" || true
done

#!/usr/bin/env bash
# The local store's pieces (lib.sh), for the test and bench helpers that start one per run:
#   bash scripts/store.sh dir                         build once (cached), print the store's directory
#   bash scripts/store.sh pg-start DIR PORT           initialise DIR if needed, start PostgreSQL with
#                                                     DocumentDB on 127.0.0.1:PORT
#   bash scripts/store.sh pg-stop DIR                 pg_ctl -m fast stop
#   bash scripts/store.sh ferretdb PG_PORT PORT DEBUG_PORT STATE_DIR
#                                                     become FerretDB on that cluster (same pid)
#   bash scripts/store.sh psql PORT SQL               run SQL as postgres in the cluster of PORT, rows unaligned
# The store's directory is FI_STORE_DIR when set (test.sh exports it), else built or found (lib.sh ensure_store).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
store="$(ensure_store)" || exit 1
case "${1:-}" in
  dir) echo "$store" ;;
  pg-start) [[ $# == 3 ]] || die "usage: store.sh pg-start DIR PORT"; store_pg_start "$store" "$2" "$3" ;;
  pg-stop) [[ $# == 2 ]] || die "usage: store.sh pg-stop DIR"; store_pg_stop "$store" "$2" ;;
  ferretdb) [[ $# == 5 ]] || die "usage: store.sh ferretdb PG_PORT PORT DEBUG_PORT STATE_DIR"; store_ferretdb_exec "$store" "$2" "$3" "$4" "$5" ;;
  psql) [[ $# == 3 ]] || die "usage: store.sh psql PORT SQL"; pg_tool "$store" psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$2" -U postgres -d postgres -c "$3" ;;
  *) die "usage: store.sh dir | pg-start DIR PORT | pg-stop DIR | ferretdb PG_PORT PORT DEBUG_PORT STATE_DIR | psql PORT SQL" ;;
esac

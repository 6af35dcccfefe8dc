#!/usr/bin/env bash
# A private PostgreSQL cluster for FerretDB (see pg_cluster_start in lib.sh), for the test and
# bench helpers that start one per run:
#   bash scripts/pg-cluster.sh start DIR PORT   initialise DIR if needed, start on 127.0.0.1:PORT,
#                                               create the database ferretdb
#   bash scripts/pg-cluster.sh stop DIR         pg_ctl -m fast stop
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
case "${1:-}" in
  start) [[ $# == 3 ]] || die "usage: pg-cluster.sh start DIR PORT"; pg_cluster_start "$2" "$3" ;;
  stop) [[ $# == 2 ]] || die "usage: pg-cluster.sh stop DIR"; pg_cluster_stop "$2" ;;
  *) die "usage: pg-cluster.sh start DIR PORT | stop DIR" ;;
esac

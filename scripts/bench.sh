#!/usr/bin/env bash
# The README's benchmark command (`npm run bench`): builds, then runs bench/run.ts, which starts
# its own Redis and FerretDB on free ports, the project's web and worker processes and the
# comparison servers, drives load on loopback and writes bench/results/. Arguments go to
# bench/run.ts (`npm run bench -- --quick`, `npm run bench -- --help`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_test_servers
ensure_wrk
# The bench's FerretDB stores into private PostgreSQL clusters (BENCH_STORE=sqlite: SQLite).
[[ "${BENCH_STORE:-postgresql}" == sqlite ]] || ensure_postgres_binaries >/dev/null
echo "building (tsc)…" >&2
npm run --silent build
exec node --import tsx bench/run.ts "$@"

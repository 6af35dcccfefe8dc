#!/usr/bin/env bash
# The README's benchmark command (`npm run bench`): builds, then runs bench/run.ts, which starts
# its own Redis and store (FerretDB v2 on PostgreSQL + DocumentDB, scripts/store-build.sh) on free ports, the project's web and worker processes and the
# comparison servers, drives load on loopback and writes bench/results/. Arguments go to
# bench/run.ts (`npm run bench -- --quick`, `npm run bench -- --help`); without any, the datasets
# round (bench/datasets.ts) runs after it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_test_servers
ensure_wrk
echo "building (tsc)…" >&2
npm run --silent build
node --import tsx bench/run.ts "$@"
# The full run (no arguments) ends with two A/B rounds of issue 25's target (completion rule and
# response history on against off): the accept rate with the example definition, which carries a
# completion rule, against a dataset without one, same API process (the datasets round, also
# `npm run bench:datasets`); then the drain of the same bursts with the rule and history on against
# both off, in the usual and the annotation-heavy mix (`npm run bench:completion`).
if [[ $# -eq 0 ]]; then
  node --expose-gc --import tsx bench/datasets.ts --rounds 2 --duration 8
  node --import tsx bench/completion-ab.ts --writes 20000 --rounds 3 --modes off,on
fi

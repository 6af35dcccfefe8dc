#!/usr/bin/env bash
# The fault, ledger and bad-input suites (`npm run test:faults`): real web and worker processes,
# a durable Redis (AOF) and the store (FerretDB v2 on PostgreSQL + DocumentDB) that the suite starts, stops and kills on ports of its own.
# Slower than `npm test` (a few minutes); .ci/run runs both. Figures of the last run go to
# test-artifacts/reliability.json. Extra arguments go to mocha (`-- --grep poison`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
ensure_test_servers
export TEST_SUITE_NAME="${TEST_SUITE_NAME:-faults}"
exec npx mocha --config test/faults/.mocharc.json "$@"
